// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// An error file that does not hold a return code is still a failure:
// UNKNOWN, never SUCCESS.
func TestErrorFileThatIsNotANumberIsUnknown(t *testing.T) {
	for _, content := range []string{"garbage", "0", ""} {
		sim, _ := newSim(t, "h100x1")
		dev, uuid := gpu(t, sim, 0)
		if err := sim.SetFault(uuid, nvml.ERROR_TIMEOUT); err != nil {
			t.Fatal(err)
		}
		if _, ret := dev.GetMemoryInfo(); ret != nvml.ERROR_TIMEOUT {
			t.Fatalf("error file with TIMEOUT: %s", nvml.ErrorString(ret))
		}
		if err := os.WriteFile(filepath.Join(sim.Dir, "faults", uuid+".error"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ret := dev.GetMemoryInfo(); ret != nvml.ERROR_UNKNOWN {
			t.Errorf("error file holding %q: %s, want UNKNOWN", content, nvml.ErrorString(ret))
		}
	}
}

// A fault file made by hand (an operator's) is noticed though the
// simulator had found no faults directory before.
func TestHandMadeLostFileIsNoticed(t *testing.T) {
	sim, _ := newSim(t, "h100x1")
	dev, uuid := gpu(t, sim, 0)
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if err := os.MkdirAll(filepath.Join(sim.Dir, "faults"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sim.Dir, "faults", uuid+".lost"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !sim.IsLost(uuid) {
		t.Error("IsLost does not see the file")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ret := dev.GetMemoryInfo(); ret == nvml.ERROR_GPU_IS_LOST {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a hand-made .lost file was not noticed within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := sim.SetLost(uuid, false); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetLost(uuid, false); err != nil {
		t.Errorf("clearing a fault twice: %v", err)
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS || sim.IsLost(uuid) {
		t.Errorf("after clearing: %s", nvml.ErrorString(ret))
	}
}

func TestEventRegistrationErrors(t *testing.T) {
	sim, _ := newSim(t, "h100x2")
	dev0, uuid0 := gpu(t, sim, 0)
	set, _ := sim.EventSetCreate()
	// The GPU-unavailable event is not among what the GPU supports.
	if ret := dev0.RegisterEvents(nvml.EventTypeGpuUnavailableError, set); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("unsupported event type: %s", nvml.ErrorString(ret))
	}
	_ = sim.SetLost(uuid0, true)
	if _, ret := dev0.GetSupportedEventTypes(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("supported events of a lost GPU: %s", nvml.ErrorString(ret))
	}
	if ret := dev0.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("registering a lost GPU: %s", nvml.ErrorString(ret))
	}
	_ = sim.SetLost(uuid0, false)
	set.Free()
	if ret := dev0.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.ERROR_UNINITIALIZED {
		t.Errorf("registering on a freed set: %s", nvml.ErrorString(ret))
	}
}

// Free wakes a Wait in progress, which returns UNINITIALIZED (what ends
// a health monitor's loop) rather than waiting out its timeout.
func TestFreeEndsAWaitInProgress(t *testing.T) {
	sim, _ := newSim(t, "h100x1")
	set, _ := sim.EventSetCreate()
	done := make(chan nvml.Return, 1)
	go func() {
		_, ret := set.Wait(60_000)
		done <- ret
	}()
	time.Sleep(20 * time.Millisecond)
	set.Free()
	select {
	case ret := <-done:
		if ret != nvml.ERROR_UNINITIALIZED {
			t.Errorf("Wait after Free: %s, want UNINITIALIZED", nvml.ErrorString(ret))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Free did not end the Wait")
	}
}

// Every set registered for an event receives it; events queue in order.
func TestEventsReachEverySetInOrder(t *testing.T) {
	sim, _ := newSim(t, "h100x1")
	dev, uuid := gpu(t, sim, 0)
	var sets []nvml.EventSet
	for range 2 {
		set, _ := sim.EventSetCreate()
		defer set.Free()
		if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			t.Fatal(nvml.ErrorString(ret))
		}
		sets = append(sets, set)
	}
	for _, xid := range []uint64{79, 94, 95} {
		if n := sim.InjectXid(uuid, xid); n != 2 {
			t.Fatalf("XID %d reached %d sets, want 2", xid, n)
		}
	}
	for i, set := range sets {
		for _, want := range []uint64{79, 94, 95} {
			e, ret := set.Wait(1000)
			if ret != nvml.SUCCESS || e.EventData != want {
				t.Fatalf("set %d: event %d (%s), want XID %d", i, e.EventData, nvml.ErrorString(ret), want)
			}
		}
	}
}

func recoveryField(t *testing.T, dev nvml.Device, ids ...uint32) []nvml.FieldValue {
	t.Helper()
	values := make([]nvml.FieldValue, len(ids))
	for i, id := range ids {
		values[i].FieldId = id
	}
	if ret := dev.GetFieldValues(values); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	return values
}

// The recovery-action field as NVML answers it: an unsigned int, per
// value; other fields are not supported by the simulator.
func TestRecoveryActionField(t *testing.T) {
	sim, _ := newSim(t, "h100x1")
	dev, uuid := gpu(t, sim, 0)
	const other = nvml.FI_DEV_ECC_CURRENT
	sim.InjectEvent(uuid, nvml.EventTypeDoubleBitEccError, 0, simulate.NoInstance, simulate.NoInstance)
	v := recoveryField(t, dev, other, nvml.FI_DEV_GET_GPU_RECOVERY_ACTION)
	if nvml.Return(v[0].NvmlReturn) != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("another field: %s, want NOT_SUPPORTED", nvml.ErrorString(nvml.Return(v[0].NvmlReturn)))
	}
	if nvml.Return(v[1].NvmlReturn) != nvml.SUCCESS || v[1].ValueType != uint32(nvml.VALUE_TYPE_UNSIGNED_INT) ||
		nvml.DeviceGpuRecoveryAction(binary.NativeEndian.Uint32(v[1].Value[:4])) != nvml.GPU_RECOVERY_ACTION_GPU_RESET {
		t.Errorf("recovery action after a double-bit ECC error: %+v, want GPU reset", v[1])
	}
	// Other events (a P-state change) need no recovery.
	if err := sim.ResetGPU(uuid); err != nil {
		t.Fatal(err)
	}
	sim.InjectEvent(uuid, nvml.EventTypePState, 0, simulate.NoInstance, simulate.NoInstance)
	if sim.RecoveryPending(uuid) {
		t.Error("a P-state event left a recovery action pending")
	}
	_ = sim.SetLost(uuid, true)
	if ret := dev.GetFieldValues(make([]nvml.FieldValue, 1)); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("field values of a lost GPU: %s", nvml.ErrorString(ret))
	}
}

// Fault files present before the first event set are faults from before
// the process started: their recovery action is pending at once, but NVML
// does not deliver their events again.
func TestFaultFilesFromBeforeTheStartAreNotDelivered(t *testing.T) {
	sim, _ := newSim(t, "h100x2")
	dev, uuid := gpu(t, sim, 0)
	_, uuid1 := gpu(t, sim, 1)
	if err := sim.SetXIDFault(uuid, "95"); err != nil {
		t.Fatal(err)
	}
	// Not understood: neither pending nor delivered.
	if err := sim.SetXIDFault(uuid1, "94 1"); err != nil {
		t.Fatal(err)
	}
	set, _ := sim.EventSetCreate()
	defer set.Free()
	if !sim.RecoveryPending(uuid) {
		t.Fatal("a fault file from before the start left no recovery action pending")
	}
	if sim.RecoveryPending(uuid1) {
		t.Error("a fault file that is not understood left a recovery action pending")
	}
	if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if e, ret := set.Wait(600); ret != nvml.ERROR_TIMEOUT {
		t.Fatalf("a fault from before the start was delivered: %+v", e)
	}
}
