// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

func TestReadOnlyNVMLRefusesChanges(t *testing.T) {
	mock := cditest.NewNVML("550.54.15", 1)
	gi, _ := mock.AddMig(0, "MIG-00000000-0000-0000-0000-000000000001")
	ro, refused := nvdev.NewReadOnly(mock)
	dev, ret := ro.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := dev.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("SetMigMode: %v", ret)
	}
	if mode, _, _ := mock.Devices[0].GetMigMode(); mode != nvml.DEVICE_MIG_ENABLE {
		t.Error("MIG mode changed through the read-only wrapper")
	}
	if ret := dev.SetComputeMode(nvml.COMPUTEMODE_EXCLUSIVE_PROCESS); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("SetComputeMode: %v", ret)
	}
	g, ret := dev.GetGpuInstanceById(gi)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if ret := g.Destroy(); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("GpuInstance.Destroy: %v", ret)
	}
	info, _ := g.GetInfo()
	if _, ret := info.Device.SetMigMode(nvml.DEVICE_MIG_DISABLE); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("SetMigMode through GpuInstanceInfo.Device: %v", ret)
	}
	if got := strings.Join(refused.List(), ", "); got != "GpuInstance.Destroy x1, SetComputeMode x1, SetMigMode x2" {
		t.Errorf("refused: %s", got)
	}
}
