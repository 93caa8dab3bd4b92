// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package deviceattr

import (
	"fmt"
	"strconv"
	"strings"
)

// GPUDeviceName is the published name of a whole GPU. The minor number is
// what the kernel driver assigns to /dev/nvidiaN; it follows PCI order and
// so stays the same across plugin restarts and reboots while the hardware
// is unchanged (unlike the NVML index, which CUDA_VISIBLE_DEVICES can skew).
func GPUDeviceName(minor int) string { return fmt.Sprintf("gpu-%d", minor) }

const (
	monitorSuffix = "-monitor"
	vfioSuffix    = "-vfio"
)

// MonitorDeviceName is the published name of a GPU's monitor device:
// "gpu-3-monitor".
func MonitorDeviceName(minor int) string { return GPUDeviceName(minor) + monitorSuffix }

// IsMonitorDeviceName reports whether name is a monitor device's name.
// Device names of the other kinds ("gpu-3", "gpu-3-mig-1g10gb-19-0") never
// match.
func IsMonitorDeviceName(name string) bool {
	rest, ok := strings.CutPrefix(name, "gpu-")
	if !ok {
		return false
	}
	minor, ok := strings.CutSuffix(rest, monitorSuffix)
	if !ok || minor == "" {
		return false
	}
	n, err := strconv.Atoi(minor)
	return err == nil && n >= 0 && strconv.Itoa(n) == minor
}

// VFIODeviceName is the published name of a GPU's passthrough device:
// "gpu-3-vfio".
func VFIODeviceName(minor int) string { return GPUDeviceName(minor) + vfioSuffix }
