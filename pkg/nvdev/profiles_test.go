// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func simulated(t *testing.T, profile string) (*simulate.Simulator, *nvdev.Inventory) {
	t.Helper()
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	return sim, inv
}

// TestMigProfilesFromRealProfileIDs (defect 1): NVML reports profile IDs
// that differ from the GPU_INSTANCE_PROFILE_* index (19 for an H100's
// 1g.10gb, index 0); profiles are named by the index, and every one of them
// is found.
func TestMigProfilesFromRealProfileIDs(t *testing.T) {
	_, inv := simulated(t, "h100x1")
	want := map[string]uint32{"1g.10gb": 19, "1g.10gb+me": 20, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0}
	got := map[string]uint32{}
	for _, p := range inv.GPUs[0].MigProfiles {
		got[p.Name] = p.Info.Id
	}
	if len(got) != len(want) {
		t.Fatalf("profiles (name: ID) %v, want %v", got, want)
	}
	for name, id := range want {
		if g, ok := got[name]; !ok || g != id {
			t.Errorf("%s: ID %d (found %v), want %d", name, g, ok, id)
		}
	}
}

// TestMigProfileIDAndIndex: both numbers are kept, the ID for counters and
// NVML calls keyed by it, the index for naming.
func TestMigProfileIDAndIndex(t *testing.T) {
	_, inv := simulated(t, "a30x1")
	for _, p := range inv.GPUs[0].MigProfiles {
		if p.Name == "2g.12gb+me" && (p.GIProfileID != 6 || p.GIProfileIndex != nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1) {
			t.Errorf("2g.12gb+me: ID %d, index %d", p.GIProfileID, p.GIProfileIndex)
		}
	}
}
