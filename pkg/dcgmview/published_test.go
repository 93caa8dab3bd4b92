// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package dcgmview_test

import (
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/dcgmview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestPublishedStaticAndDynamicMig resolves what the plugin publishes for
// two simulated H100s, GPU 1 partitioned by an admin (static MIG: two
// 3g.40gb devices) and GPU 0 offered for dynamic MIG, as the exporter
// would, for every device of both kinds (the e2e test,
// test/e2e/podresources_static_test.go, runs a pod on one static MIG
// device of a cluster). Each static MIG device resolves to its parent and
// to the UUID NVML gave it, and its name is not read; each dynamic one
// resolves to its parent, the GPU instance profile ID NVML reports for its
// profile and a placement NVML offers for it.
func TestPublishedStaticAndDynamicMig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	sim, inv, err := simulate.Discover("h100x2", "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	static := inv.GPUs[1]
	if err := sim.SetMigModeAsAdmin(static.UUID, nvml.DEVICE_MIG_ENABLE); err != nil {
		t.Fatal(err)
	}
	made := map[uint32]string{} // placement start -> MIG UUID from NVML
	for _, start := range []uint32{0, 4} {
		in, err := mig.Create(static.Device, mig.Placement{Profile: profile(t, static, "3g.40gb"), Start: start, Size: 4})
		if err != nil {
			t.Fatal(err)
		}
		made[start] = in.UUID
	}
	// The plugin discovers the node after the admin's layout.
	inv, err = nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
	ix := dcgmview.NewIndex(resourceslices.Objects(dcgmview.DriverName, "n1", res))

	var staticSeen, dynamicSeen int
	for _, s := range res.Pools["n1"].Slices {
		for _, d := range s.Devices {
			id, ok := ix.Resolve("n1", d.Name)
			n, isMig := deviceattr.ParseMigDeviceName(d.Name)
			switch {
			case !isMig:
				continue
			case !ok || id.Type != "mig":
				t.Errorf("%s: resolved %+v %v, want a MIG device", d.Name, id, ok)
			case n.ParentMinor == static.Minor:
				staticSeen++
				if id.GPUUUID != static.UUID || id.MIGUUID != made[n.Start] || id.MIGUUID == "" || id.Dynamic != nil || id.Profile != "3g.40gb" {
					t.Errorf("static %s: resolved %+v (spec %+v), want parent %s, MIG %s, profile 3g.40gb, no name read",
						d.Name, id, id.Dynamic, static.UUID, made[n.Start])
				}
			default:
				dynamicSeen++
				g := inv.GPUs[0]
				p := profile(t, g, id.Profile)
				if id.GPUUUID != g.UUID || id.MIGUUID != "" || id.Dynamic == nil ||
					id.Dynamic.ParentMinor != uint32(g.Minor) || id.Dynamic.GIProfileID != p.Info.Id || !offers(p, id.Dynamic.PlacementStart) {
					t.Errorf("dynamic %s: resolved %+v (spec %+v), want parent %s (minor %d), profile ID %d, a placement of %s",
						d.Name, id, id.Dynamic, g.UUID, g.Minor, p.Info.Id, p.Name)
				}
			}
		}
	}
	if staticSeen != 2 || dynamicSeen == 0 {
		t.Errorf("resolved %d static and %d dynamic MIG devices, want 2 and some", staticSeen, dynamicSeen)
	}
}

func profile(t *testing.T, g *nvdev.GPU, name string) nvdev.MigProfile {
	t.Helper()
	for _, p := range g.MigProfiles {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("GPU %d has no MIG profile %q", g.Minor, name)
	return nvdev.MigProfile{}
}

func offers(p nvdev.MigProfile, start uint32) bool {
	for _, pl := range p.Placements {
		if pl.Start == start {
			return true
		}
	}
	return false
}
