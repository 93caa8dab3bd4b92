// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	inode "github.com/gpu-dra-driver/gpu-dra-driver/internal/node"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

const (
	testDriver = "gpu.nvidia.com"
	testNode   = "n1"
)

// node is a plugin under test on temp dirs, reached like the kubelet
// reaches it: gRPC over its unix socket. The in-process node
// (internal/node) builds it; node adds the driver's private settings and
// keeps the *Driver for tests that read its state.
type node struct {
	t      testing.TB
	in     *inode.Node
	root   string
	client *fake.Clientset
	driver *Driver
	cancel context.CancelFunc
	// kubelet and conn are the node's DRA client and connection while
	// the plugin runs.
	kubelet drapb.DRAPluginClient
	conn    *grpc.ClientConn
	// dynamicMIG and fractional are passed to the driver at every start.
	dynamicMIG bool
	fractional bool
	// shares is --consumable-shares*, passed at every start.
	shares resourceslices.ConsumableShares
	// migProfiles is --mig-profiles, passed at every start.
	migProfiles []string
	// noMonitors is --monitor-devices=false, passed at every start.
	noMonitors bool
	// passthrough is --passthrough-gpus, passed at every start.
	passthrough resourceslices.PassthroughSelector
	health      HealthConfig
	// podUID turns on the helper's rolling updates, as the chart does
	// (POD_UID): the sockets then carry the UID in their names.
	podUID types.UID
	// api, when set, is the client the plugin gets instead of client (an
	// API server that refuses or hangs); start then waits neither for
	// slices nor for the background reconciliation. mpsRunner replaces
	// local daemons.
	api       kubernetes.Interface
	mpsRunner sharing.Runner
	// staleWait is Config.StaleHolderWait, passed at every start.
	staleWait time.Duration
}

func newNode(t testing.TB, profile string) *node { return newNodeWith(t, profile, false) }

// newMigNode starts a node that offers dynamic MIG.
func newMigNode(t testing.TB, profile string) *node { return newNodeWith(t, profile, true) }

// newSharingNode starts a node whose GPUs are offered for memory-fraction sharing.
func newSharingNode(t testing.TB, profile string) *node {
	t.Helper()
	n := newNodeWith(t, profile, false)
	n.fractional = true
	n.restart(profile)
	return n
}

func newNodeWith(t testing.TB, profile string, dynamicMIG bool) *node {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; keep the root short.
	root, err := os.MkdirTemp("", "gdra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return newNodeAt(t, root, profile, dynamicMIG)
}

// newNodeAt starts a node on an existing root (e.g. with simulated state).
func newNodeAt(t testing.TB, root, profile string, dynamicMIG bool) *node {
	t.Helper()
	n := &node{t: t, root: root, dynamicMIG: dynamicMIG}
	n.in = inode.NewAt(inode.Config{DriverName: testDriver, NodeName: testNode, NodeUID: "node-uid", Start: n.startDriver}, root)
	n.client = n.in.Client
	n.start(profile)
	t.Cleanup(n.stop)
	t.Cleanup(n.stopMPSDaemons) // runs before the state dir is removed
	return n
}

// startDriver is the node's inode.StartFunc: Start with the test's settings.
func (n *node) startDriver(ctx context.Context, dirs inode.Dirs, client kubernetes.Interface, be *backend.Backend) (inode.Plugin, error) {
	d, err := Start(ctx, Config{
		DriverName: testDriver, NodeName: testNode, Client: client, Backend: be, MPSRunner: n.mpsRunner,
		StateDir: dirs.State, CDIDir: dirs.CDI, PluginDir: dirs.Plugin, RegistrarDir: dirs.Registry,
		Publish:           resourceslices.Options{DynamicMIG: n.dynamicMIG, FractionalMemory: n.fractional, ConsumableShares: n.shares, MigProfiles: n.migProfiles, NoMonitorDevices: n.noMonitors, Passthrough: n.passthrough},
		Health:            n.health,
		RollingUpdateUID:  n.podUID,
		SharingStrategies: []configapi.SharingStrategy{configapi.TimeSlicingStrategy, configapi.MpsStrategy},
		StaleHolderWait:   n.staleWait,
	})
	if err != nil {
		return nil, err
	}
	n.driver = d
	return d, nil
}

// stopMPSDaemons ends stand-in daemons a failed test may have left running.
func (n *node) stopMPSDaemons() {
	entries, _ := os.ReadDir(filepath.Join(n.dir("state"), "mps"))
	m := &sharing.MPS{Root: filepath.Join(n.dir("state"), "mps"), Runner: sharing.ProcessRunner{}}
	for _, e := range entries {
		_ = m.Stop(m.Daemon(e.Name()))
	}
}

func (n *node) dir(name string) string { return n.in.Dir(name) }

func (n *node) start(profile string) {
	n.t.Helper()
	be, err := backend.Open(backend.Options{SimulateProfile: profile, NodeName: testNode, StateDir: n.in.StateDir()})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().V(3)))
	n.cancel = cancel
	n.in.API = n.api
	if err := n.in.Start(ctx, be); err != nil {
		n.t.Fatal(err)
	}
	n.conn, n.kubelet = n.in.Conn, n.in.Kubelet
}

func (n *node) stop() {
	if n.driver == nil {
		return
	}
	n.in.Stop()
	n.cancel()
	n.driver, n.conn, n.kubelet = nil, nil, nil
}

func (n *node) restart(profile string) {
	n.stop()
	n.start(profile)
}

// claim creates an allocated claim on devices, optionally with opaque configs.
func (n *node) claim(name string, devices []string, configs ...string) *resourceapi.ResourceClaim {
	n.t.Helper()
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: testDriver, Pool: testNode, Device: d})
	}
	for _, cfg := range configs {
		c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
			Source: resourceapi.AllocationConfigSourceClaim,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: testDriver, Parameters: runtime.RawExtension{Raw: []byte(cfg)},
			}},
		})
	}
	created, err := n.client.ResourceV1().ResourceClaims("default").Create(context.Background(), c, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return created
}

// adminClaim creates an allocated claim whose devices are all allocated
// with admin access (as the scheduler allocates a request with
// adminAccess: true).
func (n *node) adminClaim(name string, devices []string) *resourceapi.ResourceClaim {
	n.t.Helper()
	c := n.claim(name, devices)
	admin := true
	for i := range c.Status.Allocation.Devices.Results {
		c.Status.Allocation.Devices.Results[i].AdminAccess = &admin
	}
	updated, err := n.client.ResourceV1().ResourceClaims("default").UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return updated
}

func pbClaims(claims ...*resourceapi.ResourceClaim) []*drapb.Claim {
	return inode.KubeletClaims(claims...)
}

func (n *node) prepare(claims ...*resourceapi.ResourceClaim) map[string]*drapb.NodePrepareResourceResponse {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answers, err := n.in.PrepareClaims(ctx, claims...)
	if err != nil {
		n.t.Fatalf("NodePrepareResources: %v", err)
	}
	return answers
}

func (n *node) unprepare(claims ...*resourceapi.ResourceClaim) map[string]*drapb.NodeUnprepareResourceResponse {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	answers, err := n.in.UnprepareClaims(ctx, claims...)
	if err != nil {
		n.t.Fatalf("NodeUnprepareResources: %v", err)
	}
	for uid, r := range answers {
		if r.Error != "" {
			n.t.Fatalf("unprepare %s: %s", uid, r.Error)
		}
	}
	return answers
}

// mustPrepare prepares a claim and returns the CDI IDs of its devices,
// without the device metadata IDs (allCDIIDs has those too).
func (n *node) mustPrepare(c *resourceapi.ResourceClaim) []string {
	n.t.Helper()
	var ids []string
	for _, id := range n.allCDIIDs(c) {
		// The kubelet helper adds one device metadata ID per request
		// (metadata_test.go checks those); the rest are the claim's.
		if !strings.HasPrefix(id, testDriver+"/metadata=") {
			ids = append(ids, id)
		}
	}
	return ids
}

// allCDIIDs prepares a claim and returns every CDI ID of the answer.
func (n *node) allCDIIDs(c *resourceapi.ResourceClaim) []string {
	n.t.Helper()
	r := n.prepare(c)[string(c.UID)]
	if r == nil || r.Error != "" {
		n.t.Fatalf("prepare %s: %+v", c.Name, r)
	}
	var ids []string
	for _, d := range r.Devices {
		ids = append(ids, d.CdiDeviceIds...)
	}
	return ids
}

func (n *node) specPath(c *resourceapi.ResourceClaim) string {
	return filepath.Join(n.dir("cdi"), fmt.Sprintf("k8s.%s-claim_%s.json", testDriver, c.UID))
}

func (n *node) checkpointFiles() []string {
	n.t.Helper()
	left, err := n.in.Leftovers()
	if err != nil {
		n.t.Fatal(err)
	}
	return left.Records
}

func (n *node) claimObj(name string) *resourceapi.ResourceClaim {
	n.t.Helper()
	c, err := n.client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return c
}

// writeStartedRecord replaces a claim's record by a PrepareStarted one.
func (n *node) writeStartedRecord(c *resourceapi.ResourceClaim) error {
	store, _, err := checkpoint.Open(filepath.Join(n.dir("state"), "checkpoint"))
	if err != nil {
		return err
	}
	rec, _ := store.Get(c.UID)
	rec.State = checkpoint.PrepareStarted
	return store.Put(rec)
}

// publishedSlices waits for the plugin's ResourceSlices in the fake API; the
// resourceslice controller creates them in the background.
func (n *node) publishedSlices() []resourceapi.ResourceSlice {
	n.t.Helper()
	published, err := n.in.PublishedSlices(context.Background())
	if err != nil {
		n.t.Fatalf("ResourceSlices not published: %v", err)
	}
	out := make([]resourceapi.ResourceSlice, 0, len(published))
	for _, s := range published {
		out = append(out, *s)
	}
	return out
}

// requireStillPrepared checks that a plugin which was restarted or
// recovered still knows claim: re-prepare returns the same CDI IDs, its
// device is refused to another claim, and unprepare removes its CDI spec.
func (n *node) requireStillPrepared(claim *resourceapi.ResourceClaim, ids []string, device string) {
	n.t.Helper()
	if again := n.mustPrepare(claim); !slices.Equal(again, ids) {
		n.t.Fatalf("after restart prepare returned %v, before %v", again, ids)
	}
	if r := n.prepare(n.claim("intruder", []string{device}))["uid-intruder"]; r.GetError() == "" {
		n.t.Fatalf("restarted plugin handed %s, held by %s, to another claim", device, claim.Name)
	}
	n.unprepare(claim)
	if _, err := os.Stat(n.specPath(claim)); !os.IsNotExist(err) {
		n.t.Fatal("CDI spec left after unprepare in restarted plugin")
	}
}
