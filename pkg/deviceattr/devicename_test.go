// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package deviceattr

import "testing"

func TestDeviceNames(t *testing.T) {
	for got, want := range map[string]string{
		GPUDeviceName(3): "gpu-3", MonitorDeviceName(3): "gpu-3-monitor", VFIODeviceName(12): "gpu-12-vfio",
		DynamicMigDeviceName(0, "1g.10gb", 19, 3): "gpu-0-mig-1g10gb-19-3", MigDeviceName(0, "1g.10gb", 3): "gpu-0-mig-1g10gb-3",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestIsMonitorDeviceName(t *testing.T) {
	for name, want := range map[string]bool{
		"gpu-0-monitor": true, "gpu-12-monitor": true,
		"gpu-0": false, "gpu-0-mig-1g10gb-19-0": false, "gpu-0-mig-1g10gb-0": false, "gpu--monitor": false, "gpu-x-monitor": false, "gpu-01-monitor": false, "monitor": false,
		"gpu-0-vfio": false,
	} {
		if got := IsMonitorDeviceName(name); got != want {
			t.Errorf("IsMonitorDeviceName(%q) = %v, want %v", name, got, want)
		}
	}
}
