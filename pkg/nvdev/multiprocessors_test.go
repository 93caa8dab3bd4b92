// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// TestMultiprocessors (defect 5): the GPU's SM count, not the 7g MIG
// profile's (98 on an A100 with 108 SMs), also on GPUs whose full profile
// is not 7g (A30) and on GPUs without MIG; unknown (0) rather than wrong
// while MIG mode is on, when NVML does not answer the core count.
func TestMultiprocessors(t *testing.T) {
	for profile, want := range map[string]int{"a100-40gbx1": 108, "a100-80gbx1": 108, "a30x1": 56, "h100x1": 132, "h200x1": 132, "b200x1": 148, "a100-80gbx1:mig": 0} {
		_, inv := simulated(t, profile)
		if got := inv.GPUs[0].Multiprocessors; got != want {
			t.Errorf("%s: %d SMs, want %d", profile, got, want)
		}
	}
	// An L40S: no MIG, compute capability 8.9 (128 cores per SM).
	dev := &mock.Device{
		GetIndexFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS }, GetMinorNumberFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-l40s", nvml.SUCCESS }, GetNameFunc: func() (string, nvml.Return) { return "NVIDIA L40S", nvml.SUCCESS },
		GetBrandFunc:                 func() (nvml.BrandType, nvml.Return) { return nvml.BRAND_NVIDIA, nvml.SUCCESS },
		GetArchitectureFunc:          func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_ADA, nvml.SUCCESS },
		GetCudaComputeCapabilityFunc: func() (int, int, nvml.Return) { return 8, 9, nvml.SUCCESS },
		GetMemoryInfoFunc:            func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 48 << 30}, nvml.SUCCESS },
		GetPciInfoFunc:               func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.SUCCESS },
		GetMigModeFunc:               func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		GetAttributesFunc:            func() (nvml.DeviceAttributes, nvml.Return) { return nvml.DeviceAttributes{}, nvml.ERROR_NOT_SUPPORTED },
		GetNumGpuCoresFunc:           func() (int, nvml.Return) { return 142 * 128, nvml.SUCCESS },
		GetGpuInstanceProfileInfoFunc: func(int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		},
	}
	lib := &mock.Interface{
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "570.133.20", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12080, nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc:     func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
		// A 570 driver: no nvmlDeviceGetAddressingMode (addressing.go).
		ExtensionsFunc: func() nvml.ExtendedInterface { return noAddressingMode },
	}
	inv, err := nvdev.Discover(lib, nvdev.Options{SysfsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.GPUs[0].Multiprocessors; got != 142 {
		t.Errorf("L40S: %d SMs, want 142", got)
	}
}
