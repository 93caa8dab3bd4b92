// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

type fixture struct {
	sim  *simulate.Simulator
	m    *Monitor
	uuid [2]string
}

// start runs a monitor over two simulated H100s: gpu-0 and gpu-1 whole,
// plus two MIG devices of gpu-1 (instances 1/0 and 2/0).
func start(t *testing.T, configure ...func(*Monitor)) *fixture {
	t.Helper()
	sim, inv, err := simulate.Discover("h100x2", "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	g0, g1 := inv.GPUs[0], inv.GPUs[1]
	devices := []Device{
		{PoolName: "n1", DeviceName: "gpu-0", UUID: g0.UUID, NVML: g0.Device},
		{PoolName: "n1", DeviceName: "gpu-1", UUID: g1.UUID, NVML: g1.Device},
		{PoolName: "n1", DeviceName: "gpu-1-mig-a", UUID: g1.UUID, NVML: g1.Device, MIG: true, Instance: &[2]uint32{1, 0}},
		{PoolName: "n1", DeviceName: "gpu-1-mig-b", UUID: g1.UUID, NVML: g1.Device, MIG: true, Instance: &[2]uint32{2, 0}},
	}
	m := New(sim, devices, IgnoredXIDs([]uint64{999}))
	m.Interval = 20 * time.Millisecond
	for _, c := range configure {
		c(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Run has registered the GPUs once the simulator delivers to a set.
	deadline := time.Now().Add(5 * time.Second)
	for sim.InjectXid(g0.UUID, 13) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the monitor never registered for events")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &fixture{sim: sim, m: m, uuid: [2]string{g0.UUID, g1.UUID}}
}

// health returns the devices' states as "name=reason" (or "name=ok").
func (f *fixture) health() string {
	var out []string
	for _, d := range f.m.Devices {
		st, _ := f.m.Status(d.DeviceName)
		r := "ok"
		if !st.Healthy {
			r = st.Reason
		}
		out = append(out, d.DeviceName+"="+r)
	}
	return strings.Join(out, " ")
}

func (f *fixture) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.health() != want {
		if time.Now().After(deadline) {
			t.Fatalf("health = %q, want %q", f.health(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const allHealthy = "gpu-0=ok gpu-1=ok gpu-1-mig-a=ok gpu-1-mig-b=ok"

func TestXIDFileTaintsTheGPUAndItsMIGDevicesUntilRemoved(t *testing.T) {
	f := start(t)
	f.waitFor(t, allHealthy)
	if err := f.sim.SetXIDFault(f.uuid[1], "79"); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "gpu-0=ok gpu-1=xid-79 gpu-1-mig-a=xid-79 gpu-1-mig-b=xid-79")
	st, _ := f.m.Status("gpu-1")
	if !strings.Contains(st.Message, "fallen off the bus") {
		t.Errorf("message %q does not say what XID 79 means", st.Message)
	}
	// Still pending: the fault stays over several polls.
	time.Sleep(5 * f.m.Interval)
	f.waitFor(t, "gpu-0=ok gpu-1=xid-79 gpu-1-mig-a=xid-79 gpu-1-mig-b=xid-79")
	if err := f.sim.SetXIDFault(f.uuid[1], ""); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, allHealthy)
}

func TestDoubleBitECCFile(t *testing.T) {
	f := start(t)
	if err := f.sim.SetXIDFault(f.uuid[0], "ecc-dbe"); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "gpu-0=ecc-dbe gpu-1=ok gpu-1-mig-a=ok gpu-1-mig-b=ok")
	// A GPU reset (the pending recovery action) clears it too.
	if err := f.sim.ResetGPU(f.uuid[0]); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, allHealthy)
}

func TestIgnoredXIDsChangeNothing(t *testing.T) {
	var mu sync.Mutex
	var seen []uint64
	f := start(t, func(m *Monitor) {
		m.OnXID = func(uuid string, xid uint64, ignored bool) {
			mu.Lock()
			defer mu.Unlock()
			if ignored && uuid == m.Devices[1].UUID {
				seen = append(seen, xid)
			}
		}
	})
	for _, xid := range []uint64{13, 31, 43, 45, 68, 109, 999} {
		f.sim.InjectXid(f.uuid[1], xid)
	}
	// A critical XID after them proves they were processed.
	f.sim.InjectXid(f.uuid[0], 48)
	f.waitFor(t, "gpu-0=xid-48 gpu-1=ok gpu-1-mig-a=ok gpu-1-mig-b=ok")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 7 {
		t.Errorf("ignored XIDs seen: %v, want 7 (six of NVIDIA's and one from the flag)", seen)
	}
}

func TestInstanceEventMarksOnlyThatMIGDeviceAndItsGPU(t *testing.T) {
	f := start(t)
	f.sim.InjectEvent(f.uuid[1], nvml.EventTypeXidCriticalError, 94, 2, 0)
	f.waitFor(t, "gpu-0=ok gpu-1=xid-94 gpu-1-mig-a=ok gpu-1-mig-b=xid-94")
}

func TestLostGPUIsReportedAndRecovers(t *testing.T) {
	f := start(t)
	if err := f.sim.SetLost(f.uuid[0], true); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "gpu-0=gpu-lost gpu-1=ok gpu-1-mig-a=ok gpu-1-mig-b=ok")
	if err := f.sim.SetLost(f.uuid[0], false); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, allHealthy)
}

func TestWatchReportsChangesToTheKubelet(t *testing.T) {
	f := start(t)
	reports := make(chan kubeletplugin.DeviceHealthReport)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.m.Watch(ctx, reports) }()
	first := <-reports
	if len(first.Devices) != 4 || first.Devices[0].Health != kubeletplugin.HealthStatusHealthy {
		t.Fatalf("initial report: %+v", first.Devices)
	}
	f.sim.InjectXid(f.uuid[0], 79)
	for r := range reports {
		if r.Devices[0].Health == kubeletplugin.HealthStatusUnhealthy {
			if !strings.Contains(r.Devices[0].Message, "XID 79") || r.Devices[1].Health != kubeletplugin.HealthStatusHealthy {
				t.Fatalf("report after XID 79 on gpu-0: %+v", r.Devices)
			}
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch returned %v on cancel", err)
	}
}

func TestBadFaultFileIsNotAnEvent(t *testing.T) {
	f := start(t)
	dir := filepath.Join(f.sim.Dir, "faults")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, f.uuid[0]+".xid"), []byte("seventy-nine"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // more than two scans of the fault files
	if got := f.health(); got != allHealthy {
		t.Fatalf("health after an unreadable fault file: %s", got)
	}
}

func TestParseXIDs(t *testing.T) {
	got, err := ParseXIDs("--health-ignored-xids", []string{" 62", "", "74"})
	if err != nil || len(got) != 2 || got[0] != 62 || got[1] != 74 {
		t.Fatalf("ParseXIDs = %v, %v", got, err)
	}
	for _, bad := range []string{"x", "0", "-1"} {
		if _, err := ParseXIDs("--health-ignored-xids", []string{bad}); err == nil || !strings.Contains(err.Error(), "--health-ignored-xids") {
			t.Errorf("ParseXIDs(%q) error = %v, want one naming the flag", bad, err)
		}
	}
}

func TestFaultFromBeforeTheStartIsARecoveryPending(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	sim, inv, err := simulate.Discover("h100x2", "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	uuid := inv.GPUs[0].UUID
	// Written by an earlier process: no event now, but a pending reset.
	if err := sim.SetXIDFault(uuid, "79"); err != nil {
		t.Fatal(err)
	}
	m := New(sim, []Device{{PoolName: "n1", DeviceName: "gpu-0", UUID: uuid, NVML: inv.GPUs[0].Device}}, nil)
	m.Interval = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	f := &fixture{sim: sim, m: m}
	f.waitFor(t, "gpu-0=recovery-pending")
	st, _ := m.Status("gpu-0")
	if !strings.Contains(st.Message, "GPU reset") {
		t.Errorf("message %q does not name the pending action", st.Message)
	}
	if err := sim.SetXIDFault(uuid, ""); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, "gpu-0=ok")
}

// gatedLib holds EventSetCreate until the gate opens.
type gatedLib struct {
	nvml.Interface
	gate chan struct{}
}

func (g gatedLib) EventSetCreate() (nvml.EventSet, nvml.Return) {
	<-g.gate
	return g.Interface.EventSetCreate()
}

// A fault from the moment the monitor says it is Ready is seen as its
// XID: readiness waits for the event set, since NVML never delivers an
// event from before registration (the driver's readiness probe relies on
// it).
func TestReadyOnlyOnceEventsAreWatched(t *testing.T) {
	sim, inv, err := simulate.Discover("h100x2", "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	uuid := inv.GPUs[0].UUID
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	m := New(gatedLib{Interface: sim, gate: gate}, []Device{{PoolName: "n1", DeviceName: "gpu-0", UUID: uuid, NVML: inv.GPUs[0].Device}}, nil)
	m.Interval = time.Hour // the first poll only: no second look at a pending recovery
	if m.Ready() {
		t.Fatal("Ready before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { open(); cancel(); <-done }()
	time.Sleep(50 * time.Millisecond)
	if m.Ready() {
		t.Fatal("Ready while the event set is not registered")
	}
	open()
	deadline := time.Now().Add(5 * time.Second)
	for !m.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("never Ready")
		}
		time.Sleep(time.Millisecond)
	}
	if err := sim.SetXIDFault(uuid, "79"); err != nil {
		t.Fatal(err)
	}
	(&fixture{sim: sim, m: m}).waitFor(t, "gpu-0=xid-79")
}

func TestReadyWithoutEventSets(t *testing.T) {
	u := newUnit(nil)
	u.m.Lib = &mock.Interface{EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }}
	u.m.Interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { u.m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for !u.m.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("a monitor that can only poll never became Ready")
		}
		time.Sleep(time.Millisecond)
	}
}

// A GPU bound to vfio-pci on purpose leaves NVML (GPU_IS_LOST on its
// handle), which is neither a fault nor a loss; the same GPU gone without
// a passthrough record is lost.
func TestPassthroughGPUIsNotLost(t *testing.T) {
	var away sync.Map
	f := start(t, func(m *Monitor) {
		m.Passthrough = func() map[string]bool {
			held := map[string]bool{}
			away.Range(func(uuid, _ any) bool { held[uuid.(string)] = true; return true })
			return held
		}
	})
	away.Store(f.uuid[0], true)
	if err := f.sim.VFIO().Bind(simulate.PCIBusID(0), "vfio-pci"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several polls
	f.waitFor(t, allHealthy)
	away.Delete(f.uuid[0])
	f.waitFor(t, "gpu-0=gpu-lost gpu-1=ok gpu-1-mig-a=ok gpu-1-mig-b=ok")
	if err := f.sim.VFIO().Bind(simulate.PCIBusID(0), "nvidia"); err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, allHealthy)
}
