// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// TestDiscoveredAttributesPerModel: what discovery reports for each
// simulated model matches the hardware (product names as nvidia-smi prints
// them, compute capabilities from NVIDIA's CUDA GPUs table, and whether a
// MIG mode change needs a reset: Ampere yes, Hopper and later no, NVIDIA
// MIG User Guide).
func TestDiscoveredAttributesPerModel(t *testing.T) {
	for _, tc := range []struct {
		profile, product, arch, cc string
		memGiB                     uint64
		needsReset                 bool
	}{
		{"a100-40gbx2", "NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", 40, true},
		{"a30x2", "NVIDIA A30", "Ampere", "8.0.0", 24, true},
		{"h100x2", "NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", 80, false},
		{"h200x2", "NVIDIA H200", "Hopper", "9.0.0", 141, false},
		{"b200x2", "NVIDIA B200", "Blackwell", "10.0.0", 180, false},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			_, inv := simulated(t, tc.profile)
			if len(inv.GPUs) != 2 || len(inv.Failed) != 0 {
				t.Fatalf("%d GPUs, %d failed", len(inv.GPUs), len(inv.Failed))
			}
			for i, g := range inv.GPUs {
				if g.ProductName != tc.product || g.Architecture != tc.arch || g.CudaComputeCapability != tc.cc || g.Brand != "Nvidia" {
					t.Errorf("GPU %d: %q %s cc %s brand %s", i, g.ProductName, g.Architecture, g.CudaComputeCapability, g.Brand)
				}
				if got := g.MemoryBytes >> 30; got != tc.memGiB {
					t.Errorf("GPU %d: %d GiB, want %d", i, got, tc.memGiB)
				}
				if !g.MigCapable || g.MigEnabled || g.MigModeChangeNeedsReset != tc.needsReset || len(g.MigDevices) != 0 {
					t.Errorf("GPU %d: MIG capable %v enabled %v needs reset %v devices %d", i, g.MigCapable, g.MigEnabled, g.MigModeChangeNeedsReset, len(g.MigDevices))
				}
				if g.Index != i || g.Minor != i || !strings.HasPrefix(g.UUID, "GPU-") {
					t.Errorf("GPU %d: index %d minor %d UUID %s", i, g.Index, g.Minor, g.UUID)
				}
			}
			if inv.GPUs[0].UUID == inv.GPUs[1].UUID {
				t.Error("two GPUs share a UUID")
			}
		})
	}
}

// placements renders a profile's placements as "start:size,...".
func placements(p nvdev.MigProfile) string {
	var out []string
	for _, pl := range p.Placements {
		out = append(out, fmt.Sprintf("%d:%d", pl.Start, pl.Size))
	}
	return strings.Join(out, ",")
}

// TestMigProfilePlacements: each profile's name, lookup index and
// placements are those of NVIDIA's MIG User Guide ("nvidia-smi mig -lgipp"
// for A100 and H100, the A30 table for four memory slices). Profiles are
// listed from the smallest up.
func TestMigProfilePlacements(t *testing.T) {
	seven := "0:1,1:1,2:1,3:1,4:1,5:1,6:1"
	for profile, want := range map[string][]struct {
		name       string
		index      int
		placements string
	}{
		"h100x1": {
			{"1g.10gb", nvml.GPU_INSTANCE_PROFILE_1_SLICE, seven},
			{"1g.10gb+me", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, seven},
			{"1g.20gb", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, "0:2,2:2,4:2,6:2"},
			{"2g.20gb", nvml.GPU_INSTANCE_PROFILE_2_SLICE, "0:2,2:2,4:2"},
			{"3g.40gb", nvml.GPU_INSTANCE_PROFILE_3_SLICE, "0:4,4:4"},
			{"4g.40gb", nvml.GPU_INSTANCE_PROFILE_4_SLICE, "0:4"},
			{"7g.80gb", nvml.GPU_INSTANCE_PROFILE_7_SLICE, "0:8"},
		},
		"a100-40gbx1": {
			{"1g.5gb", nvml.GPU_INSTANCE_PROFILE_1_SLICE, seven},
			{"1g.5gb+me", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, seven},
			{"1g.10gb", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, "0:2,2:2,4:2,6:2"},
			{"2g.10gb", nvml.GPU_INSTANCE_PROFILE_2_SLICE, "0:2,2:2,4:2"},
			{"3g.20gb", nvml.GPU_INSTANCE_PROFILE_3_SLICE, "0:4,4:4"},
			{"4g.20gb", nvml.GPU_INSTANCE_PROFILE_4_SLICE, "0:4"},
			{"7g.40gb", nvml.GPU_INSTANCE_PROFILE_7_SLICE, "0:8"},
		},
		"a30x1": {
			{"1g.6gb", nvml.GPU_INSTANCE_PROFILE_1_SLICE, "0:1,1:1,2:1,3:1"},
			{"1g.6gb+me", nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, "0:1,1:1,2:1,3:1"},
			{"2g.12gb", nvml.GPU_INSTANCE_PROFILE_2_SLICE, "0:2,2:2"},
			{"2g.12gb+me", nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1, "0:2,2:2"},
			{"4g.24gb", nvml.GPU_INSTANCE_PROFILE_4_SLICE, "0:4"},
		},
	} {
		t.Run(profile, func(t *testing.T) {
			_, inv := simulated(t, profile)
			got := inv.GPUs[0].MigProfiles
			if len(got) != len(want) {
				t.Fatalf("%d profiles, want %d", len(got), len(want))
			}
			byName := map[string]nvdev.MigProfile{}
			for i, p := range got {
				byName[p.Name] = p
				if i > 0 && p.Info.SliceCount < got[i-1].Info.SliceCount {
					t.Errorf("%s listed after the larger %s", p.Name, got[i-1].Name)
				}
			}
			for _, w := range want {
				p, ok := byName[w.name]
				if !ok {
					t.Errorf("no profile %s", w.name)
					continue
				}
				if p.GIProfileIndex != w.index || placements(p) != w.placements {
					t.Errorf("%s: index %d placements %s, want index %d placements %s", w.name, p.GIProfileIndex, placements(p), w.index, w.placements)
				}
			}
			wantSlices := 8
			if profile == "a30x1" {
				wantSlices = 4
			}
			if got := nvdev.MemorySlices(got); got != wantSlices {
				t.Errorf("MemorySlices = %d, want %d", got, wantSlices)
			}
		})
	}
}

// TestExistingMigDevicesAreDiscovered: MIG devices that exist when the
// plugin starts are reported with their UUID, instance IDs and placement,
// ordered by placement; MigUUID finds each, and not a missing one.
func TestExistingMigDevicesAreDiscovered(t *testing.T) {
	sim, inv := simulated(t, "h100x2")
	g := inv.GPUs[1]
	profile := func(name string) nvdev.MigProfile {
		i := slices.IndexFunc(g.MigProfiles, func(p nvdev.MigProfile) bool { return p.Name == name })
		if i < 0 {
			t.Fatalf("no profile %s", name)
		}
		return g.MigProfiles[i]
	}
	made := map[uint32]mig.Instance{}
	for _, p := range []mig.Placement{{Profile: profile("3g.40gb"), Start: 4, Size: 4}, {Profile: profile("1g.10gb"), Start: 1, Size: 1}} {
		inst, err := mig.Create(g.Device, p)
		if err != nil {
			t.Fatal(err)
		}
		made[p.Start] = inst
	}
	inv2, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	if g0 := inv2.GPUs[0]; g0.MigEnabled || len(g0.MigDevices) != 0 {
		t.Fatalf("GPU 0 changed: MIG %v, %d devices", g0.MigEnabled, len(g0.MigDevices))
	}
	g1 := inv2.GPUs[1]
	if !g1.MigEnabled || len(g1.MigDevices) != 2 {
		t.Fatalf("GPU 1: MIG %v, %d devices, want 2", g1.MigEnabled, len(g1.MigDevices))
	}
	for i, want := range []struct {
		start uint32
		name  string
	}{{1, "1g.10gb"}, {4, "3g.40gb"}} {
		d := g1.MigDevices[i]
		inst := made[want.start]
		if d.Placement.Start != want.start || d.Profile.Name != want.name || d.UUID != inst.UUID || d.GIID != inst.GIID || d.CIID != inst.CIID || !strings.HasPrefix(d.UUID, "MIG-") {
			t.Errorf("device %d: %+v, want %s at %d as %+v", i, d, want.name, want.start, inst)
		}
		if uuid, err := nvdev.MigUUID(g1.Device, d.GIID, d.CIID); err != nil || uuid != d.UUID {
			t.Errorf("MigUUID(%d, %d) = %s, %v", d.GIID, d.CIID, uuid, err)
		}
	}
	if _, err := nvdev.MigUUID(g1.Device, 99, 0); err == nil || !strings.Contains(err.Error(), "GPU instance 99") {
		t.Errorf("MigUUID of a missing instance: %v", err)
	}
}

// failingHandle makes NVML fail to hand out one GPU's handle.
type failingHandle struct {
	nvml.Interface
	bad int
}

func (f failingHandle) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if i == f.bad {
		return nil, nvml.ERROR_UNKNOWN
	}
	return f.Interface.DeviceGetHandleByIndex(i)
}

// TestHandleFailureLeavesOthers: a GPU whose handle NVML cannot give is
// listed as failed, without a UUID, and the rest are discovered; node-wide
// failures (driver version, device count) fail discovery with the reason.
func TestHandleFailureLeavesOthers(t *testing.T) {
	sim, _ := simulated(t, "h100x3")
	inv, err := nvdev.Discover(failingHandle{Interface: sim, bad: 1}, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.GPUs) != 2 || inv.GPUs[0].Index != 0 || inv.GPUs[1].Index != 2 {
		t.Fatalf("discovered %d GPUs", len(inv.GPUs))
	}
	if len(inv.Failed) != 1 || inv.Failed[0].Index != 1 || inv.Failed[0].UUID != "" || !strings.Contains(inv.Failed[0].Err.Error(), "get handle") {
		t.Fatalf("failed %+v", inv.Failed)
	}
	for name, lib := range map[string]*mock.Interface{
		"get driver version": {SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "", nvml.ERROR_UNINITIALIZED }},
		"get device count": {
			SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "570.133.20", nvml.SUCCESS },
			SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12080, nvml.SUCCESS },
			DeviceGetCountFunc:             func() (int, nvml.Return) { return 0, nvml.ERROR_DRIVER_NOT_LOADED },
		},
	} {
		if _, err := nvdev.Discover(lib, nvdev.Options{}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s failing: %v", name, err)
		}
	}
}

func TestMigModeChangeNeedsReset(t *testing.T) {
	for arch, want := range map[nvml.DeviceArchitecture]bool{
		nvml.DEVICE_ARCH_AMPERE: true, nvml.DEVICE_ARCH_HOPPER: false, nvml.DEVICE_ARCH_BLACKWELL: false, nvml.DEVICE_ARCH_UNKNOWN: true,
	} {
		dev := &mock.Device{GetArchitectureFunc: func() (nvml.DeviceArchitecture, nvml.Return) { return arch, nvml.SUCCESS }}
		if got := nvdev.MigModeChangeNeedsReset(dev); got != want {
			t.Errorf("%s: needs reset %v, want %v", nvdev.ArchitectureName(arch), got, want)
		}
	}
	unknown := &mock.Device{GetArchitectureFunc: func() (nvml.DeviceArchitecture, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }}
	if !nvdev.MigModeChangeNeedsReset(unknown) {
		t.Error("a GPU whose architecture NVML cannot tell must count as needing a reset")
	}
}
