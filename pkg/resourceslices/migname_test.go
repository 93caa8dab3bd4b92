// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// TestDynamicMigDeviceNameFromProfile: the name of a profile as nvdev
// reads it carries the profile's name and its GPU instance profile ID, not
// its index (pkg/deviceattr's tests check the naming itself).
func TestDynamicMigDeviceNameFromProfile(t *testing.T) {
	p := nvdev.MigProfile{Name: "1g.10gb+me", GIProfileID: 20, GIProfileIndex: 7}
	got := DynamicMigDeviceName(12, p, 6)
	if want := "gpu-12-mig-1g10gbme-20-6"; got != want {
		t.Errorf("DynamicMigDeviceName(12, %+v, 6) = %q, want %q", p, got, want)
	}
	if n, ok := deviceattr.ParseMigDeviceName(got); !ok || n.GIProfileID != p.GIProfileID || n.Start != 6 || n.ParentMinor != 12 {
		t.Errorf("ParseMigDeviceName(%q) = %+v %v", got, n, ok)
	}
}
