// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// DynamicMigDeviceName is deviceattr.DynamicMigDeviceName for a profile as
// nvdev reads it from NVML (the name, and the GPU instance profile ID NVML
// reports). The naming itself, and why it carries the ID, is in
// pkg/deviceattr/migname.go, where kubectl-gpu reads it back without NVML.
func DynamicMigDeviceName(parentMinor int, p nvdev.MigProfile, start uint32) string {
	return deviceattr.DynamicMigDeviceName(parentMinor, p.Name, p.GIProfileID, start)
}
