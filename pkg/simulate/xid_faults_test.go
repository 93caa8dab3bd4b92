// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func TestXIDFaultFileDeliversAnEventAndAPendingReset(t *testing.T) {
	sim, _ := newSim(t, "h100x2")
	dev0, uuid0 := gpu(t, sim, 0)
	_, uuid1 := gpu(t, sim, 1)
	set, _ := sim.EventSetCreate()
	defer set.Free()
	if ret := dev0.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if a, ret := health.RecoveryAction(dev0); ret != nvml.SUCCESS || a != nvml.GPU_RECOVERY_ACTION_NONE {
		t.Fatalf("healthy GPU: recovery action %d (%s)", a, nvml.ErrorString(ret))
	}

	// An XID of one MIG instance, as NVML reports it with instance IDs.
	if err := sim.SetXIDFault(uuid0, "94 1 0"); err != nil {
		t.Fatal(err)
	}
	e, ret := set.Wait(2000)
	if ret != nvml.SUCCESS || e.EventType != nvml.EventTypeXidCriticalError || e.EventData != 94 || e.GpuInstanceId != 1 || e.ComputeInstanceId != 0 || e.Device != dev0 {
		t.Fatalf("event %+v (%s)", e, nvml.ErrorString(ret))
	}
	if a, _ := health.RecoveryAction(dev0); a != nvml.GPU_RECOVERY_ACTION_GPU_RESET {
		t.Fatalf("recovery action after XID 94: %d", a)
	}
	// Delivered once, not on every scan.
	if e, ret := set.Wait(500); ret != nvml.ERROR_TIMEOUT {
		t.Fatalf("second event %+v", e)
	}
	// A new content is a new event.
	if err := sim.SetXIDFault(uuid0, "ecc-dbe"); err != nil {
		t.Fatal(err)
	}
	if e, ret := set.Wait(2000); ret != nvml.SUCCESS || e.EventType != nvml.EventTypeDoubleBitEccError || e.GpuInstanceId != simulate.NoInstance {
		t.Fatalf("event %+v (%s)", e, nvml.ErrorString(ret))
	}
	// Removing the file is the reset.
	if err := sim.SetXIDFault(uuid0, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for sim.RecoveryPending(uuid0) {
		if time.Now().After(deadline) {
			t.Fatal("recovery still pending after the fault file was removed")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// An application XID needs no recovery action.
	sim.InjectXid(uuid1, 13)
	if sim.RecoveryPending(uuid1) {
		t.Fatal("XID 13 left a recovery action pending")
	}
	sim.InjectXid(uuid1, 79)
	if !sim.RecoveryPending(uuid1) {
		t.Fatal("XID 79 left no recovery action pending")
	}
	if err := sim.ResetGPU(uuid1); err != nil || sim.RecoveryPending(uuid1) {
		t.Fatalf("ResetGPU: %v, pending %v", err, sim.RecoveryPending(uuid1))
	}
}
