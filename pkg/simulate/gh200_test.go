// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"path/filepath"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestGH200: the Grace Hopper model (models.go, sources cited there) is an
// H100-class GPU with 96 GB whose MIG profiles carry NVIDIA's GH200 names
// and instance counts, and the slices a node of them publishes validate,
// MIG mode off and on, with and without dynamic MIG.
func TestGH200(t *testing.T) {
	// Profile name -> instances (placements) per GPU, as NVIDIA's MIG tooling
	// lists them for GH200 (1g.24gb as the H100 table's 1g.20gb row).
	want := map[string]int{
		"1g.12gb": 7, "1g.12gb+me": 7, "1g.24gb": 4, "2g.24gb": 3,
		"3g.48gb": 2, "4g.48gb": 1, "7g.96gb": 1,
	}
	for _, suffix := range []string{"", simulate.MigSuffix} {
		profile := "gh200x1" + suffix
		_, inv, err := simulate.Discover(profile, "n1", filepath.Join(t.TempDir(), "sim"))
		if err != nil {
			t.Fatalf("%s: %v", profile, err)
		}
		if len(inv.GPUs) != 1 || len(inv.Failed) != 0 {
			t.Fatalf("%s: %d GPUs, %d failed", profile, len(inv.GPUs), len(inv.Failed))
		}
		g := inv.GPUs[0]
		if g.ProductName != "NVIDIA GH200 480GB" || g.Architecture != "Hopper" || g.CudaComputeCapability != "9.0.0" ||
			g.MemoryBytes != 96<<30 || !g.MigCapable || g.MigModeChangeNeedsReset || g.MigEnabled != (suffix != "") {
			t.Errorf("%s: %s %s cc %s, %d bytes, MIG capable %v enabled %v needs reset %v", profile, g.ProductName, g.Architecture,
				g.CudaComputeCapability, g.MemoryBytes, g.MigCapable, g.MigEnabled, g.MigModeChangeNeedsReset)
		}
		if !g.MigEnabled && g.Multiprocessors != 132 {
			t.Errorf("%s: %d SMs, want 132", profile, g.Multiprocessors)
		}
		got := map[string]int{}
		for _, p := range g.MigProfiles {
			got[p.Name] = len(p.Placements)
		}
		if len(got) != len(want) {
			t.Errorf("%s: profiles %v, want %v", profile, got, want)
		}
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s: %s has %d placements, want %d", profile, name, got[name], n)
			}
		}
		for _, dynamic := range []bool{false, true} {
			res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: dynamic})
			if err := resourceslices.Validate(res); err != nil {
				t.Errorf("%s dynamic MIG %v: %v", profile, dynamic, err)
			}
			objs := resourceslices.Objects("gpu.nvidia.com", "n1", res)
			devices := 0
			for _, o := range objs {
				devices += len(o.Spec.Devices)
			}
			if devices == 0 {
				t.Errorf("%s dynamic MIG %v: no devices in %d slices", profile, dynamic, len(objs))
			}
		}
	}
}
