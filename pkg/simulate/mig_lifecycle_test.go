// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The order NVML enforces: a GPU instance is destroyed only once its
// compute instances are gone, and holds one compute instance spanning it.
func TestGPUInstanceLifecycleOrder(t *testing.T) {
	sim, _ := newSim(t, "h100x1:mig")
	dev, uuid := gpu(t, sim, 0)
	mig := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	giID, _ := mig.GetGpuInstanceId()
	ciID, _ := mig.GetComputeInstanceId()
	gi, ret := dev.GetGpuInstanceById(giID)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("a second compute instance: %s, want INSUFFICIENT_RESOURCES", nvml.ErrorString(ret))
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_IN_USE {
		t.Errorf("destroying a GPU instance with a compute instance: %s, want IN_USE", nvml.ErrorString(ret))
	}
	if n := sim.MigInstanceCount(uuid); n != 1 {
		t.Fatalf("%d GPU instances after a refused destroy", n)
	}
	ci, ret := gi.GetComputeInstanceById(ciID)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if ret := ci.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if _, ret := dev.GetMigDeviceHandleByIndex(0); ret != nvml.ERROR_NOT_FOUND {
		t.Errorf("a MIG device without its compute instance: %s, want NOT_FOUND", nvml.ErrorString(ret))
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if n := sim.MigInstanceCount(uuid); n != 0 {
		t.Errorf("%d GPU instances after destroying the only one", n)
	}
	if _, ret := dev.GetGpuInstanceById(giID); ret == nvml.SUCCESS {
		t.Error("a destroyed GPU instance is still found by its ID")
	}
}

// CreateGpuInstance without a placement takes the first free one, and
// reports INSUFFICIENT_RESOURCES once the profile's instances are used up.
func TestCreateGpuInstanceTakesFreePlacements(t *testing.T) {
	sim, _ := newSim(t, "h100x1:mig")
	dev, uuid := gpu(t, sim, 0)
	info := profileInfo(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	var starts []uint32
	for range info.InstanceCount {
		gi, ret := dev.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			t.Fatalf("GPU instance %d of %d: %s", len(starts)+1, info.InstanceCount, nvml.ErrorString(ret))
		}
		gInfo, _ := gi.GetInfo()
		for _, s := range starts {
			if s == gInfo.Placement.Start {
				t.Fatalf("two GPU instances at slice %d", s)
			}
		}
		starts = append(starts, gInfo.Placement.Start)
	}
	if _, ret := dev.CreateGpuInstance(&info); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("one GPU instance more than the profile allows: %s", nvml.ErrorString(ret))
	}
	if n := sim.MigInstanceCount(uuid); n != int(info.InstanceCount) {
		t.Errorf("%d GPU instances, want %d", n, info.InstanceCount)
	}
}

func TestCreateGpuInstanceRefusals(t *testing.T) {
	sim, _ := newSim(t, "h100x2")
	dev, uuid := gpu(t, sim, 0)
	info := profileInfo(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if _, ret := dev.CreateGpuInstance(&info); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("with MIG mode off: %s, want NOT_SUPPORTED", nvml.ErrorString(ret))
	}
	if err := sim.SetMigModeAsAdmin(uuid, on); err != nil {
		t.Fatal(err)
	}
	bogus := info
	bogus.Id = 1000
	if _, ret := dev.CreateGpuInstance(&bogus); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("an unknown profile: %s, want INVALID_ARGUMENT", nvml.ErrorString(ret))
	}
	_ = sim.SetFault(uuid, nvml.ERROR_GPU_IS_LOST)
	if _, ret := dev.CreateGpuInstance(&info); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("on a GPU that fails: %s", nvml.ErrorString(ret))
	}
	_ = sim.SetFault(uuid, nvml.SUCCESS)
	if _, ret := dev.CreateGpuInstance(&info); ret != nvml.SUCCESS {
		t.Errorf("after the fault cleared: %s", nvml.ErrorString(ret))
	}
	// MIG mode is per GPU.
	other, _ := gpu(t, sim, 1)
	if _, ret := other.CreateGpuInstance(&info); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("on the other GPU, MIG mode off: %s", nvml.ErrorString(ret))
	}
}
