// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// The chaos test runs the plugin as a child process (this test binary,
// re-run with childEnv set) so that it can be SIGKILLed at any point of
// prepare and unprepare, as the kubelet's node would see it: a crash, an
// OOM kill, a node agent killing the container.
const childEnv = "GDRA_TEST_PLUGIN_ROOT"

// chaosNode is what the child plugin runs with: a simulated node and the
// claims its API server knows.
type chaosNode struct {
	Profile        string                       `json:"profile"`
	FractionalGPUs []int                        `json:"fractionalGPUs"`
	Claims         []*resourceapi.ResourceClaim `json:"claims"`
	// Instance names the plugin's socket directories, so that two
	// instances can serve at once as in a rolling update.
	Instance string `json:"instance,omitempty"`
	// Passthrough offers every GPU for passthrough (chaos_vfio_test.go).
	Passthrough bool `json:"passthrough,omitempty"`
}

// runPluginChildIfRequested turns the test binary into a plugin process
// serving the kubelet socket under the given root until it is killed.
func runPluginChildIfRequested() {
	root := os.Getenv(childEnv)
	if root == "" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "plugin child:", err)
		os.Exit(3)
	}
	var cfg chaosNode
	data, err := os.ReadFile(filepath.Join(root, "node.json"))
	if err == nil {
		err = json.Unmarshal(data, &cfg)
	}
	if err != nil {
		fail(err)
	}
	objects := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}}
	for _, c := range cfg.Claims {
		objects = append(objects, c)
	}
	state := filepath.Join(root, "state")
	be, err := backend.Open(backend.Options{SimulateProfile: cfg.Profile, NodeName: testNode, StateDir: state})
	if err != nil {
		fail(err)
	}
	ctx := klog.NewContext(context.Background(), klog.Background())
	d, err := Start(ctx, Config{
		DriverName: testDriver, NodeName: testNode, Client: fakeapi.NewClientset(objects...), Backend: be,
		StateDir: state, CDIDir: filepath.Join(root, "cdi"), PluginDir: filepath.Join(root, "plugin"+cfg.Instance), RegistrarDir: filepath.Join(root, "registry"+cfg.Instance),
		Publish: resourceslices.Options{DynamicMIG: true, FractionalMemory: len(cfg.FractionalGPUs) > 0, FractionalGPUs: cfg.FractionalGPUs,
			Passthrough: resourceslices.PassthroughSelector{All: cfg.Passthrough}},
		SharingStrategies: []configapi.SharingStrategy{configapi.TimeSlicingStrategy, configapi.MpsStrategy},
	})
	if err != nil {
		fail(err)
	}
	// Claims deleted while the plugin was down are cleaned up in the
	// background; the rig checks for leftovers once they are.
	for !d.Reconciled() {
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(root, "ready"+cfg.Instance), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		fail(err)
	}
	select {}
}

// pluginProcess is one running child.
type pluginProcess struct {
	cmd     *exec.Cmd
	conn    *grpc.ClientConn
	kubelet drapb.DRAPluginClient
	exited  chan struct{}
}

type chaosRig struct {
	t    *testing.T
	root string
	node chaosNode
	proc *pluginProcess
}

func (r *chaosRig) start() {
	r.t.Helper()
	data, _ := json.Marshal(r.node)
	if err := os.WriteFile(filepath.Join(r.root, "node.json"), data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	ready := filepath.Join(r.root, "ready"+r.node.Instance)
	os.Remove(ready)
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+r.root)
	logf, _ := os.OpenFile(filepath.Join(r.root, "plugin.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &pluginProcess{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	deadline := time.After(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		select {
		case <-p.exited:
			log, _ := os.ReadFile(filepath.Join(r.root, "plugin.log"))
			r.t.Fatalf("plugin exited at start (it must never crash-loop on its own state):\n%s", tail(log, 3000))
		case <-deadline:
			r.t.Fatal("plugin did not start within 60s")
		case <-time.After(5 * time.Millisecond):
		}
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(r.root, "plugin"+r.node.Instance, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.t.Fatal(err)
	}
	p.conn, p.kubelet = conn, drapb.NewDRAPluginClient(conn)
	r.proc = p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (r *chaosRig) kill() {
	if r.proc == nil {
		return
	}
	_ = r.proc.cmd.Process.Signal(syscall.SIGKILL)
	testwait.Receive(r.t, r.proc.exited, "the killed plugin to exit")
	r.proc.conn.Close()
	r.proc = nil
}

// call runs fn against the plugin; with killAfter >= 0 the plugin is
// SIGKILLed that long after the call started. It returns per-claim errors
// ("" for success) or nil when the call itself failed.
func (r *chaosRig) prepare(claims []*resourceapi.ResourceClaim) (map[string]*drapb.NodePrepareResourceResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.proc.kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: pbClaims(claims...)})
	if err != nil {
		return nil, err
	}
	return resp.Claims, nil
}

func (r *chaosRig) unprepare(claims []*resourceapi.ResourceClaim) (map[string]*drapb.NodeUnprepareResourceResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.proc.kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: pbClaims(claims...)})
	if err != nil {
		return nil, err
	}
	return resp.Claims, nil
}

// killDuring runs op and SIGKILLs the plugin after a random delay that
// lands before, inside or after op's work.
// It reports whether the kill came while op was still running.
func (r *chaosRig) killDuring(rng *rand.Rand, op func()) (interrupted bool) {
	var wg sync.WaitGroup
	var done atomic.Bool
	wg.Add(1)
	go func() { defer wg.Done(); op(); done.Store(true) }()
	time.Sleep(time.Duration(rng.IntN(12000)) * time.Microsecond)
	interrupted = !done.Load()
	r.kill()
	wg.Wait()
	return interrupted
}

func chaosClaim(name string, devices []string, config string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, time.Now().UnixNano()))},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: testDriver, Pool: testNode, Device: d})
	}
	if config != "" {
		c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
			Source: resourceapi.AllocationConfigSourceClaim,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: testDriver, Parameters: runtime.RawExtension{Raw: []byte(config)}}},
		}}
	}
	return c
}

func memoryShare(name, device, memory string) *resourceapi.ResourceClaim {
	c := chaosClaim(name, []string{device}, "")
	r := &c.Status.Allocation.Devices.Results[0]
	share := types.UID("share-" + string(c.UID))
	r.ShareID = &share
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}
	return c
}

// roundClaims is the mix a busy node sees: a whole GPU, a MIG pair, a
// time-sliced claim shared by pods, and two memory fractions of one GPU.
func roundClaims() []*resourceapi.ResourceClaim {
	return []*resourceapi.ResourceClaim{
		chaosClaim("whole", []string{"gpu-0"}, ""),
		chaosClaim("mig-pair", []string{"gpu-1-mig-3g40gb-9-4", "gpu-1-mig-2g20gb-14-0"}, ""),
		chaosClaim("time-sliced", []string{"gpu-2"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`),
		memoryShare("fraction-a", "gpu-3", "20Gi"),
		memoryShare("fraction-b", "gpu-3", "30Gi"),
	}
}

// wantGPUs is which /dev/nvidiaN each claim's containers must see.
var wantGPUs = map[string][]string{"whole": {"/dev/nvidia0"}, "mig-pair": {"/dev/nvidia1"}, "time-sliced": {"/dev/nvidia2"}, "fraction-a": {"/dev/nvidia3"}, "fraction-b": {"/dev/nvidia3"}}

var gpuNode = regexp.MustCompile(`^/dev/nvidia[0-9]+$`)

// TestChaosKillsDuringPrepareAndUnprepare plays the kubelet against a
// plugin process that is SIGKILLed at random points of prepare and of
// unprepare, and restarted, round after round. The kubelet retries until
// each call succeeds, as the real one does. Every claim must end prepared
// with exactly its devices, and once all are unprepared and deleted
// nothing may be left: no CDI spec, no record, no MIG instance, no MPS
// daemon, no changed time slice. GDRA_CHAOS_ROUNDS sets the rounds (two
// kills each); `make chaos-local` runs hundreds.
func TestChaosKillsDuringPrepareAndUnprepare(t *testing.T) {
	rounds := 4
	if v, err := strconv.Atoi(os.Getenv("GDRA_CHAOS_ROUNDS")); err == nil {
		rounds = v
	}
	if testing.Short() {
		rounds = 1
	}
	root, err := os.MkdirTemp("", "gchaos")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	r := &chaosRig{t: t, root: root, node: chaosNode{Profile: "h100x4", FractionalGPUs: []int{3}}}
	t.Cleanup(r.kill)
	t.Cleanup(func() { stopDaemons(filepath.Join(root, "state", "mps")) })
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	kills, interrupted := 0, 0
	for round := range rounds {
		claims := roundClaims()
		r.node.Claims = claims
		r.start()
		if r.killDuring(rng, func() { _, _ = r.prepare(claims) }) {
			interrupted++
		}
		kills++
		r.start()
		resp, err := r.prepare(claims)
		if err != nil {
			t.Fatalf("round %d: prepare after restart: %v", round, err)
		}
		for _, c := range claims {
			res := resp[string(c.UID)]
			if res.GetError() != "" {
				t.Fatalf("round %d: claim %s: %s", round, c.Name, res.GetError())
			}
			var ids []string
			for _, d := range res.Devices {
				ids = append(ids, d.CdiDeviceIds...)
			}
			var gpus []string
			for _, m := range mountTargets(inject(t, filepath.Join(root, "cdi"), ids...)) {
				if gpuNode.MatchString(m) {
					gpus = append(gpus, m)
				}
			}
			slices.Sort(gpus)
			if !slices.Equal(slices.Compact(gpus), wantGPUs[c.Name]) {
				t.Fatalf("round %d: claim %s sees %v, want %v", round, c.Name, gpus, wantGPUs[c.Name])
			}
		}
		if r.killDuring(rng, func() { _, _ = r.unprepare(claims) }) {
			interrupted++
		}
		kills++
		// Half the rounds delete the claims while the plugin is down (its
		// start-up cleans them up), half unprepare them as the kubelet does.
		if round%2 == 0 {
			r.node.Claims = nil
			r.start()
		} else {
			r.start()
			resp, err := r.unprepare(claims)
			if err != nil {
				t.Fatalf("round %d: unprepare after restart: %v", round, err)
			}
			for uid, res := range resp {
				if res.GetError() != "" {
					t.Fatalf("round %d: unprepare %s: %s", round, uid, res.GetError())
				}
			}
		}
		r.kill()
		requireNothingLeft(t, root, r.node.Profile, round)
	}
	t.Logf("%d rounds, %d SIGKILLs (%d while a prepare or unprepare call was in flight), nothing left behind", rounds, kills, interrupted)
}

func stopDaemons(root string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(root, e.Name(), "daemon.pid")); err == nil {
			if pid, err := strconv.Atoi(string(data)); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

func requireNothingLeft(t *testing.T, root, profile string, round int) {
	t.Helper()
	var specs []string
	_ = filepath.WalkDir(filepath.Join(root, "cdi"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			specs = append(specs, path)
		}
		return nil
	})
	records, _ := filepath.Glob(filepath.Join(root, "state", "checkpoint", "*.json"))
	aside, _ := filepath.Glob(filepath.Join(root, "state", "checkpoint", "*.corrupt-*"))
	daemons, _ := os.ReadDir(filepath.Join(root, "state", "mps"))
	if len(specs)+len(records)+len(aside)+len(daemons) > 0 {
		t.Fatalf("round %d left specs %v, records %v, moved aside %v, MPS daemons %d", round, specs, records, aside, len(daemons))
	}
	sim, inv, err := simulate.Discover(profile, testNode, filepath.Join(root, "state", "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range inv.GPUs {
		if n := sim.MigInstanceCount(g.UUID); n != 0 {
			t.Fatalf("round %d: %d MIG instances left on %s", round, n, g.UUID)
		}
		if ts := sim.TimeSlice(g.UUID); ts != "Default" {
			t.Fatalf("round %d: time slice of %s left at %s", round, g.UUID, ts)
		}
	}
}

// TestTwoPluginProcessesOneStateDir is a rolling update: a new plugin
// process starts on the state of one that still runs. The new one takes
// over what the old one prepared; the old one refuses further calls, so
// the kubelet's retry reaches the new one and nothing is done twice.
func TestTwoPluginProcessesOneStateDir(t *testing.T) {
	root, err := os.MkdirTemp("", "gtwo")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	x := chaosClaim("x", []string{"gpu-1-mig-3g40gb-9-0"}, "")
	y := chaosClaim("y", []string{"gpu-1"}, "")
	z := chaosClaim("z", []string{"gpu-2"}, "")
	node := chaosNode{Profile: "h100x4", Claims: []*resourceapi.ResourceClaim{x, y, z}}
	old := &chaosRig{t: t, root: root, node: node}
	t.Cleanup(old.kill)
	old.start()
	resp, err := old.prepare([]*resourceapi.ResourceClaim{x})
	if err != nil || resp[string(x.UID)].GetError() != "" {
		t.Fatalf("old instance prepare: %v %v", err, resp)
	}
	node.Instance = "-new"
	newer := &chaosRig{t: t, root: root, node: node}
	t.Cleanup(newer.kill)
	newer.start() // while the old one still serves

	resp, err = old.prepare([]*resourceapi.ResourceClaim{z})
	if err != nil || !strings.Contains(resp[string(z.UID)].GetError(), "replaced by a newer one") {
		t.Fatalf("old instance after take-over: %v %v", err, resp)
	}
	// The new instance knows x: same answer, and its GPU is held.
	resp, err = newer.prepare([]*resourceapi.ResourceClaim{x, y, z})
	if err != nil {
		t.Fatal(err)
	}
	if e := resp[string(x.UID)].GetError(); e != "" {
		t.Fatalf("new instance re-prepare of x: %s", e)
	}
	if e := resp[string(y.UID)].GetError(); !strings.Contains(e, "shares GPU hardware") {
		t.Fatalf("new instance gave x's GPU to y: %q", e)
	}
	if e := resp[string(z.UID)].GetError(); e != "" {
		t.Fatalf("new instance prepare of z: %s", e)
	}
	un, err := newer.unprepare([]*resourceapi.ResourceClaim{x, z})
	if err != nil {
		t.Fatal(err)
	}
	for uid, res := range un {
		if res.GetError() != "" {
			t.Fatalf("unprepare %s: %s", uid, res.GetError())
		}
	}
	old.kill()
	newer.kill()
	requireNothingLeft(t, root, node.Profile, 0)
}
