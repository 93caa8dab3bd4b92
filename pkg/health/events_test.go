// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// fakeGPU is an NVML device whose answers a test sets: the memory query
// (lost or not) and the recovery action.
type fakeGPU struct {
	mu       sync.Mutex
	memRet   nvml.Return
	action   nvml.DeviceGpuRecoveryAction
	fieldRet nvml.Return // of the call
	valueRet nvml.Return // of the field
	*mock.Device
}

func newFakeGPU(uuid string) *fakeGPU {
	g := &fakeGPU{}
	g.Device = &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			g.mu.Lock()
			defer g.mu.Unlock()
			return nvml.Memory{}, g.memRet
		},
		GetFieldValuesFunc: func(values []nvml.FieldValue) nvml.Return {
			g.mu.Lock()
			defer g.mu.Unlock()
			if g.fieldRet != nvml.SUCCESS {
				return g.fieldRet
			}
			values[0].NvmlReturn = uint32(g.valueRet)
			binary.NativeEndian.PutUint32(values[0].Value[:4], uint32(g.action))
			return nvml.SUCCESS
		},
	}
	return g
}

func (g *fakeGPU) set(f func(g *fakeGPU)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

// fakeClock is the monitor's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type unit struct {
	m     *Monitor
	gpu   *fakeGPU
	clock *fakeClock
}

// newUnit is a monitor without an event set over one fake GPU "G" as a
// whole-GPU device and two static MIG devices (1/0, 2/0), and a dynamic
// MIG device whose instance InstanceOf reports.
func newUnit(ignored XIDSet) *unit {
	g := newFakeGPU("G")
	clock := &fakeClock{now: t0}
	devices := []Device{
		{DeviceName: "gpu", UUID: "G", NVML: g},
		{DeviceName: "mig-a", UUID: "G", NVML: g, MIG: true, Instance: &[2]uint32{1, 0}},
		{DeviceName: "mig-b", UUID: "G", NVML: g, MIG: true, Instance: &[2]uint32{2, 0}},
		{DeviceName: "mig-dyn", UUID: "G", NVML: g, MIG: true},
	}
	m := New(nil, devices, ignored)
	m.now = clock.Now
	m.InstanceOf = func(device string) (uint32, uint32, bool) {
		if device == "mig-dyn" {
			return 5, 0, true
		}
		return 0, 0, false
	}
	return &unit{m: m, gpu: g, clock: clock}
}

// states is every device as "name=reason" ("name=ok" when healthy).
func (u *unit) states() string { return (&fixture{m: u.m}).health() }

func (u *unit) event(eventType, data uint64, gi, ci uint32) {
	u.m.init()
	u.m.handle(context.Background(), nvml.EventData{Device: u.gpu, EventType: eventType, EventData: data, GpuInstanceId: gi, ComputeInstanceId: ci})
}

func (u *unit) expect(t *testing.T, want string) {
	t.Helper()
	if got := u.states(); got != want {
		t.Fatalf("health = %q, want %q", got, want)
	}
}

const unitHealthy = "gpu=ok mig-a=ok mig-b=ok mig-dyn=ok"

func TestEventClassification(t *testing.T) {
	for _, tc := range []struct {
		name      string
		eventType uint64
		data      uint64
		reason    string
		message   string
	}{
		{"critical XID", nvml.EventTypeXidCriticalError, 79, "xid-79", "XID 79: GPU has fallen off the bus"},
		{"XID outside the catalogue", nvml.EventTypeXidCriticalError, 154, "xid-154", "XID 154: see NVIDIA's XID catalogue"},
		{"double-bit ECC", nvml.EventTypeDoubleBitEccError, 0, ReasonDoubleBitECC, "uncorrectable memory error"},
		{"GPU unavailable", nvml.EventTypeGpuUnavailableError, 0, ReasonGPULost, "GPU unavailable"},
		// An XID bit with another bit: the XID wins.
		{"XID with other bits", nvml.EventTypeXidCriticalError | nvml.EventTypePState, 95, "xid-95", "uncontained ECC error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(nil)
			u.event(tc.eventType, tc.data, NoInstance, NoInstance)
			u.expect(t, "gpu="+tc.reason+" mig-a="+tc.reason+" mig-b="+tc.reason+" mig-dyn="+tc.reason)
			st, _ := u.m.Status("gpu")
			if !strings.Contains(st.Message, tc.message) {
				t.Errorf("message %q, want it to contain %q", st.Message, tc.message)
			}
			if f := u.m.Faults("G"); len(f) != 1 || !f[0].Since.Equal(t0) || f[0].GI != NoInstance || f[0].CI != NoInstance {
				t.Errorf("faults %+v, want one of the whole GPU since the clock's now", f)
			}
		})
	}
}

func TestEventsThatAreNotFaults(t *testing.T) {
	u := newUnit(nil)
	u.event(nvml.EventTypePState, 0, NoInstance, NoInstance)
	u.event(nvml.EventTypeSingleBitEccError, 0, NoInstance, NoInstance)
	u.event(nvml.EventTypeClock, 0, NoInstance, NoInstance)
	u.expect(t, unitHealthy)
	// From a GPU the node does not publish (another UUID): ignored.
	u.m.handle(context.Background(), nvml.EventData{Device: newFakeGPU("other"), EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	u.m.handle(context.Background(), nvml.EventData{Device: nil, EventType: nvml.EventTypeXidCriticalError, EventData: 79})
	u.expect(t, unitHealthy)
}

// A handle other than the one discovered (NVML may hand out another for
// the same GPU) is matched by its UUID.
func TestEventFromAnotherHandleOfThePublishedGPU(t *testing.T) {
	u := newUnit(nil)
	u.m.init()
	u.m.handle(context.Background(), nvml.EventData{Device: newFakeGPU("G"), EventType: nvml.EventTypeXidCriticalError, EventData: 48, GpuInstanceId: NoInstance, ComputeInstanceId: NoInstance})
	u.expect(t, "gpu=xid-48 mig-a=xid-48 mig-b=xid-48 mig-dyn=xid-48")
}

func TestIgnoredXIDsIncludeTheFlagsExtraList(t *testing.T) {
	u := newUnit(IgnoredXIDs([]uint64{79}))
	type call struct {
		uuid    string
		xid     uint64
		ignored bool
	}
	var calls []call
	u.m.OnXID = func(uuid string, xid uint64, ignored bool) { calls = append(calls, call{uuid, xid, ignored}) }
	for _, xid := range append(append([]uint64{}, DefaultIgnoredXIDs...), 79) {
		u.event(nvml.EventTypeXidCriticalError, xid, NoInstance, NoInstance)
	}
	u.expect(t, unitHealthy)
	u.event(nvml.EventTypeXidCriticalError, 94, NoInstance, NoInstance)
	u.expect(t, "gpu=xid-94 mig-a=xid-94 mig-b=xid-94 mig-dyn=xid-94")
	if len(calls) != len(DefaultIgnoredXIDs)+2 {
		t.Fatalf("OnXID calls %v, want one per XID", calls)
	}
	for _, c := range calls[:len(calls)-1] {
		if !c.ignored || c.uuid != "G" {
			t.Errorf("OnXID(%q, %d, %v), want the GPU's UUID and ignored", c.uuid, c.xid, c.ignored)
		}
	}
	if last := calls[len(calls)-1]; last.ignored || last.xid != 94 {
		t.Errorf("OnXID for XID 94: %+v, want not ignored", last)
	}
	// The defaults are not ignored when a monitor has its own set.
	u2 := newUnit(XIDSet{79: true})
	u2.event(nvml.EventTypeXidCriticalError, 13, NoInstance, NoInstance)
	u2.expect(t, "gpu=xid-13 mig-a=xid-13 mig-b=xid-13 mig-dyn=xid-13")
}

func TestMIGAttributionByInstance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gi, ci uint32
		want   string
	}{
		{"static 1/0", 1, 0, "gpu=xid-94 mig-a=xid-94 mig-b=ok mig-dyn=ok"},
		{"static 2/0", 2, 0, "gpu=xid-94 mig-a=ok mig-b=xid-94 mig-dyn=ok"},
		{"dynamic 5/0", 5, 0, "gpu=xid-94 mig-a=ok mig-b=ok mig-dyn=xid-94"},
		{"another CI of GI 1", 1, 1, "gpu=xid-94 mig-a=ok mig-b=ok mig-dyn=ok"},
		// A GPU instance without a compute instance (CI any) is the
		// whole GPU, as NVML reports a GPU-wide event.
		{"GI without CI", 1, NoInstance, "gpu=xid-94 mig-a=xid-94 mig-b=xid-94 mig-dyn=xid-94"},
		{"CI without GI", NoInstance, 0, "gpu=xid-94 mig-a=xid-94 mig-b=xid-94 mig-dyn=xid-94"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(nil)
			u.event(nvml.EventTypeXidCriticalError, 94, tc.gi, tc.ci)
			u.expect(t, tc.want)
			if f := u.m.Faults("G"); len(f) == 1 && f[0].wholeGPU() && (f[0].GI != NoInstance || f[0].CI != NoInstance) {
				t.Errorf("a whole-GPU fault keeps instance IDs %d/%d", f[0].GI, f[0].CI)
			}
		})
	}
}

func TestRecoveryWhenNVMLReportsNoPendingAction(t *testing.T) {
	u := newUnit(nil)
	u.m.init()
	ctx := context.Background()
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_GPU_RESET })
	u.event(nvml.EventTypeXidCriticalError, 79, NoInstance, NoInstance)
	u.m.Poll(ctx)
	u.expect(t, "gpu=xid-79 mig-a=xid-79 mig-b=xid-79 mig-dyn=xid-79")

	// Reset: no action pending. A fault recorded at the read's time (the
	// clock has not moved) may belong to an action NVML has not reported
	// yet: it stays for the next poll.
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_NONE })
	u.m.Poll(ctx)
	u.expect(t, "gpu=xid-79 mig-a=xid-79 mig-b=xid-79 mig-dyn=xid-79")
	u.clock.Step(time.Second)
	u.m.Poll(ctx)
	u.expect(t, unitHealthy)
	if st, _ := u.m.Status("gpu"); !st.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("healthy since %v, want the poll's time", st.Since)
	}
}

func TestFaultsStayWhileNVMLCannotReportRecovery(t *testing.T) {
	for _, tc := range []struct {
		name          string
		call, value   nvml.Return
		memory        nvml.Return
		wantRemaining string
	}{
		{"field not supported (driver before r550)", nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, nvml.SUCCESS, "xid-79"},
		{"call not supported", nvml.ERROR_NOT_SUPPORTED, nvml.SUCCESS, nvml.SUCCESS, "xid-79"},
		{"invalid argument", nvml.ERROR_INVALID_ARGUMENT, nvml.SUCCESS, nvml.SUCCESS, "xid-79"},
		{"unknown error", nvml.ERROR_UNKNOWN, nvml.SUCCESS, nvml.SUCCESS, "xid-79"},
		// The memory query failing otherwise says nothing of the GPU.
		{"memory query fails", nvml.ERROR_UNKNOWN, nvml.SUCCESS, nvml.ERROR_UNKNOWN, "xid-79"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(nil)
			u.event(nvml.EventTypeXidCriticalError, 79, NoInstance, NoInstance)
			u.gpu.set(func(g *fakeGPU) { g.fieldRet, g.valueRet, g.memRet = tc.call, tc.value, tc.memory })
			for range 3 {
				u.clock.Step(time.Second)
				u.m.Poll(context.Background())
			}
			if st, _ := u.m.Status("gpu"); st.Healthy || st.Reason != tc.wantRemaining {
				t.Errorf("status %+v, want still %s", st, tc.wantRemaining)
			}
		})
	}
}

func TestPendingActionAtTwoPollsIsAFaultFromBeforeTheStart(t *testing.T) {
	u := newUnit(nil)
	ctx := context.Background()
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_NODE_REBOOT })
	u.m.Poll(ctx)
	// Seen once: an event on its way may explain it.
	u.expect(t, unitHealthy)
	u.clock.Step(time.Second)
	u.m.Poll(ctx)
	u.expect(t, "gpu=recovery-pending mig-a=recovery-pending mig-b=recovery-pending mig-dyn=recovery-pending")
	if st, _ := u.m.Status("gpu"); !strings.Contains(st.Message, "node reboot") {
		t.Errorf("message %q does not name the action", st.Message)
	}
	// The event arrives late: it replaces the recovery-pending fault.
	u.event(nvml.EventTypeDoubleBitEccError, 0, NoInstance, NoInstance)
	if f := u.m.Faults("G"); len(f) != 1 || f[0].Reason != ReasonDoubleBitECC {
		t.Errorf("faults after the event: %+v, want only ecc-dbe", f)
	}
}

func TestPendingActionSeenOnceThenGoneIsNoFault(t *testing.T) {
	u := newUnit(nil)
	ctx := context.Background()
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_GPU_RESET })
	u.m.Poll(ctx)
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_NONE })
	u.m.Poll(ctx)
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_GPU_RESET })
	u.m.Poll(ctx)
	// Not twice in a row: still healthy.
	u.expect(t, unitHealthy)
}

func TestLostGPUClearsOnlyTheLostFault(t *testing.T) {
	u := newUnit(nil)
	ctx := context.Background()
	u.gpu.set(func(g *fakeGPU) { g.memRet = nvml.ERROR_GPU_IS_LOST; g.action = nvml.GPU_RECOVERY_ACTION_GPU_RESET })
	u.m.Poll(ctx)
	u.expect(t, "gpu=gpu-lost mig-a=gpu-lost mig-b=gpu-lost mig-dyn=gpu-lost")
	u.clock.Step(time.Second)
	u.event(nvml.EventTypeXidCriticalError, 79, NoInstance, NoInstance)
	u.clock.Step(time.Second)
	u.gpu.set(func(g *fakeGPU) { g.memRet = nvml.SUCCESS })
	u.m.Poll(ctx)
	// The GPU answers, but its XID waits for a reset.
	u.expect(t, "gpu=xid-79 mig-a=xid-79 mig-b=xid-79 mig-dyn=xid-79")
	u.gpu.set(func(g *fakeGPU) { g.action = nvml.GPU_RECOVERY_ACTION_NONE })
	u.m.Poll(ctx)
	u.expect(t, unitHealthy)
}

func TestRecoveryActionNames(t *testing.T) {
	for a, want := range map[nvml.DeviceGpuRecoveryAction]string{
		nvml.GPU_RECOVERY_ACTION_NONE:            "none",
		nvml.GPU_RECOVERY_ACTION_GPU_RESET:       "GPU reset",
		nvml.GPU_RECOVERY_ACTION_NODE_REBOOT:     "node reboot",
		nvml.GPU_RECOVERY_ACTION_DRAIN_P2P:       "drain peer-to-peer traffic",
		nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET: "drain and reset",
		42:                                       "action 42",
	} {
		if got := recoveryActionName(a); got != want {
			t.Errorf("recoveryActionName(%d) = %q, want %q", a, got, want)
		}
	}
}

func TestRecoveryActionReadsTheField(t *testing.T) {
	g := newFakeGPU("G")
	g.action = nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET
	if a, ret := RecoveryAction(g); ret != nvml.SUCCESS || a != nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET {
		t.Errorf("RecoveryAction = %d, %v", a, nvml.ErrorString(ret))
	}
	g.valueRet = nvml.ERROR_NOT_SUPPORTED
	if _, ret := RecoveryAction(g); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("a field NVML cannot read returned %v", nvml.ErrorString(ret))
	}
	g.fieldRet = nvml.ERROR_GPU_IS_LOST
	if _, ret := RecoveryAction(g); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("a failed call returned %v", nvml.ErrorString(ret))
	}
	calls := g.GetFieldValuesCalls()
	if len(calls) == 0 || calls[0].FieldValues[0].FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
		t.Errorf("asked for fields %+v, want FI_DEV_GET_GPU_RECOVERY_ACTION", calls)
	}
}
