// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// recordingStatus is a StatusReporter that remembers what it was told.
type recordingStatus struct {
	mu    sync.Mutex
	calls map[types.UID]int
	last  map[types.UID][]checkpoint.PreparedDevice
}

func (r *recordingStatus) Prepared(claim *resourceapi.ResourceClaim, devices []checkpoint.PreparedDevice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls, r.last = map[types.UID]int{}, map[types.UID][]checkpoint.PreparedDevice{}
	}
	r.calls[claim.UID]++
	r.last[claim.UID] = devices
}

func (r *recordingStatus) count(uid types.UID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[uid]
}

// failingEdits wraps the simulator's CDI edits with a switch that makes
// every spec write fail, as a full disk or a broken nvcdi would.
type failingEdits struct {
	cdi.SimulatedEdits
	fail atomic.Bool
}

var errInjectedCDI = errors.New("injected CDI failure")

func (f *failingEdits) ForClaim(devices []cdi.Device) (cdispec.ContainerEdits, error) {
	if f.fail.Load() {
		return cdispec.ContainerEdits{}, errInjectedCDI
	}
	return f.SimulatedEdits.ForClaim(devices)
}

// node is one simulated node with a State prepared the way the driver
// wires it: a real checkpoint store and CDI writer under a temp dir.
type node struct {
	t       *testing.T
	sim     *simulate.Simulator
	inv     *nvdev.Inventory
	devices map[string]*AllocatableDevice
	dir     string
	edits   *failingEdits
	cdi     *cdi.Writer
	store   *checkpoint.Store
	status  *recordingStatus
	state   *State
	// passthrough, when set, is the State's (passthrough_test.go).
	passthrough *PassthroughConfig
	// cdiEdits, when set, replaces edits in the CDI writer restart builds
	// (nvcdi over a driver root: driverupgrade_test.go).
	cdiEdits cdi.Edits
}

// newNode simulates profile (e.g. "h100x2"). Every GPU is published whole
// as gpu-<minor>; with dynamicMIG, every MIG placement of it is published
// too, as mig-<minor>-<profile index>-<start>.
func newNode(t *testing.T, profile string, dynamicMIG bool) *node {
	t.Helper()
	dir := t.TempDir()
	sim, inv, err := simulate.Discover(profile, testPool, filepath.Join(dir, "sim"))
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, sim: sim, inv: inv, dir: dir, devices: map[string]*AllocatableDevice{}}
	for _, g := range inv.GPUs {
		n.devices[gpuName(g.Minor)] = &AllocatableDevice{Name: gpuName(g.Minor), Kind: configapi.WholeGPU, GPU: g, Partitionable: dynamicMIG}
		if !dynamicMIG {
			continue
		}
		for _, prof := range g.MigProfiles {
			for _, pl := range prof.Placements {
				name := migName(g.Minor, prof.Name, pl.Start)
				n.devices[name] = &AllocatableDevice{Name: name, Kind: configapi.DynamicMIG, GPU: g, Placement: mig.Placement{Profile: prof, Start: pl.Start, Size: pl.Size}}
			}
		}
	}
	n.edits = &failingEdits{SimulatedEdits: cdi.SimulatedEdits{
		DevicePath: sim.DevicePath, ControlDevicePath: sim.ControlDevicePath(), MigDevicePath: sim.MigDevicePath,
	}}
	n.restart()
	return n
}

func gpuName(minor int) string { return fmt.Sprintf("gpu-%d", minor) }

// migName names a dynamic MIG placement; profile names carry '.' and '+',
// which device names may not.
func migName(minor int, profile string, start uint32) string {
	return fmt.Sprintf("mig-%d-%x-%d", minor, []byte(profile), start)
}

// mig returns the name of the placement of a profile at start on GPU minor.
func (n *node) mig(minor int, profile string, start uint32) string {
	n.t.Helper()
	name := migName(minor, profile, start)
	if n.devices[name] == nil {
		n.t.Fatalf("no placement %s at %d on GPU %d", profile, start, minor)
	}
	return name
}

// restart builds a new State over the same state directories, as a
// restarted plugin does; Recover is the caller's.
func (n *node) restart() {
	n.t.Helper()
	store, _, err := checkpoint.Open(filepath.Join(n.dir, "checkpoint"))
	if err != nil {
		n.t.Fatal(err)
	}
	var edits cdi.Edits = n.edits
	if n.cdiEdits != nil {
		edits = n.cdiEdits
	}
	w, err := cdi.NewWriter(filepath.Join(n.dir, "cdi"), testDriver, edits)
	if err != nil {
		n.t.Fatal(err)
	}
	n.store, n.cdi, n.status = store, w, &recordingStatus{}
	n.state = New(Config{
		DriverName: testDriver, PoolName: testPool, Devices: n.devices, Ledger: ledger.New(store), CDI: w, Status: n.status,
		Sharing:     &SharingConfig{TimeSlicer: n.sim, NodeName: testPool, Allowed: map[configapi.SharingStrategy]bool{configapi.TimeSlicingStrategy: true}},
		BootID:      n.sim.BootID(),
		Passthrough: n.passthrough,
	})
	w.VFIO = cdi.VFIOOptions{SimulatedDevDir: filepath.Join(n.sim.Dir, "dev", "vfio"), Resource: "vfio." + testDriver}
}

func (n *node) uuid(minor int) string { return n.inv.GPUs[minor].UUID }

// result is one allocated device of a claim.
type result struct {
	request, device string
	admin           bool
}

func dev(device string) result { return result{request: "gpu", device: device} }

// claim is an allocated claim of this node's pool; its spec has a request
// for every request name its results use.
func claim(uid types.UID, results ...result) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-" + string(uid), Namespace: "ns", UID: uid},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	var names []string
	for _, r := range results {
		ar := resourceapi.DeviceRequestAllocationResult{Request: r.request, Driver: testDriver, Pool: testPool, Device: r.device}
		if r.admin {
			ar.AdminAccess = new(bool)
			*ar.AdminAccess = true
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, ar)
		if !slices.Contains(names, r.request) {
			names = append(names, r.request)
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: r.request, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: testDriver}})
		}
	}
	return c
}

func ref(c *resourceapi.ResourceClaim) kubeletplugin.NamespacedObject {
	return kubeletplugin.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID}
}

// prepare prepares a claim and fails the test on error, or after a
// timeout: a lock left held would otherwise hang the test binary.
func (n *node) prepare(c *resourceapi.ResourceClaim) []kubeletplugin.Device {
	n.t.Helper()
	devs, err := n.tryPrepare(c)
	if err != nil {
		n.t.Fatalf("prepare %s: %v", c.UID, err)
	}
	return devs
}

func (n *node) tryPrepare(c *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	n.t.Helper()
	type answer struct {
		devs []kubeletplugin.Device
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		devs, err := n.state.Prepare(context.Background(), c)
		done <- answer{devs, err}
	}()
	select {
	case a := <-done:
		return a.devs, a.err
	case <-time.After(10 * time.Second):
		n.t.Fatalf("prepare %s did not return within 10s: a lock is still held", c.UID)
		return nil, nil
	}
}

func (n *node) unprepare(c *resourceapi.ResourceClaim) {
	n.t.Helper()
	done := make(chan error, 1)
	go func() { done <- n.state.Unprepare(context.Background(), ref(c)) }()
	select {
	case err := <-done:
		if err != nil {
			n.t.Fatalf("unprepare %s: %v", c.UID, err)
		}
	case <-time.After(10 * time.Second):
		n.t.Fatalf("unprepare %s did not return within 10s", c.UID)
	}
}

// assertGone checks that nothing of a claim is left: no record, no CDI spec.
func (n *node) assertGone(uid types.UID) {
	n.t.Helper()
	if rec, ok := n.store.Get(uid); ok {
		n.t.Errorf("claim %s still has a checkpoint record: %+v", uid, rec)
	}
	if _, err := os.Stat(n.cdi.SpecPath(uid)); !errors.Is(err, os.ErrNotExist) {
		n.t.Errorf("claim %s still has a CDI spec (stat: %v)", uid, err)
	}
}

// migMode is the current MIG mode of GPU minor.
func (n *node) migMode(minor int) int {
	n.t.Helper()
	current, _, ret := n.inv.GPUs[minor].Device.GetMigMode()
	if ret != nvml.SUCCESS {
		n.t.Fatalf("get MIG mode: %v", ret)
	}
	return current
}

type cdiDevice = cdi.Device

// createMig creates a dynamic MIG device behind the State's back, as a
// plugin that died before recording it would have.
func createMig(n *node, name string) (mig.Instance, error) {
	d := n.devices[name]
	return mig.Create(d.GPU.Device, d.Placement)
}
