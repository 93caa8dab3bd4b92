// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// dcgmDynamicMig is the pattern dcgm-exporter reads a dynamic MIG device's
// identity from (NVIDIA/dcgm-exporter internal/pkg/transformation/dra.go,
// draDynamicMIGNameRegex, used by parseDRAMigSpec): parent minor, GPU
// instance profile ID, placement start.
var dcgmDynamicMig = regexp.MustCompile(`^gpu-(\d+)-mig-.+-(\d+)-(\d+)$`)

// TestDynamicMigNamesReadableByDCGMExporter holds every dynamic MIG device
// that every simulated model publishes against dcgm-exporter's pattern: the
// minor it reads is the parent GPU's, and the profile ID and start are
// those of a GPU instance profile and placement of the model's own tables
// (the ones `nvidia-smi mig -lgip`/`-lgipp` list, models.go), the profile
// ID the one whose memory the device has. Every placement of the tables is
// published, each once. Static MIG devices publish their uuid, which the
// exporter reads instead: the pattern does not match their names.
func TestDynamicMigNamesReadableByDCGMExporter(t *testing.T) {
	for _, model := range simulate.ModelNames() {
		t.Run(model, func(t *testing.T) {
			// MIG mode on, so that Ampere GPUs (whose MIG mode changes only
			// with a reset) offer dynamic MIG too.
			name := model + "x2" + simulate.MigSuffix
			prof, err := simulate.ParseProfile(name)
			if err != nil {
				t.Fatal(err)
			}
			inv := simulatedInventory(t, name)
			minorOf := map[string]int{}
			for _, g := range inv.GPUs {
				minorOf[g.UUID] = g.Minor
			}
			// What the model's tables say: profile ID -> memory, and every
			// (minor, profile ID, start) a GPU has.
			memMB := map[int]uint64{}
			want := map[string]bool{}
			for _, info := range prof.GPU.MIGProfiles.GpuInstanceProfiles {
				memMB[int(info.Id)] = info.MemorySizeMB
				for _, pl := range prof.GPU.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
					for _, g := range inv.GPUs {
						want[fmt.Sprintf("%d/%d/%d", g.Minor, info.Id, pl.Start)] = true
					}
				}
			}
			res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
			if err := resourceslices.Validate(res); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, s := range res.Pools["n1"].Slices {
				for _, d := range s.Devices {
					if *d.Attributes[deviceattr.AttrType].StringValue != deviceattr.TypeMIG {
						continue
					}
					m := dcgmDynamicMig.FindStringSubmatch(d.Name)
					if m == nil {
						t.Errorf("%s: dcgm-exporter's pattern does not match", d.Name)
						continue
					}
					minor, _ := strconv.Atoi(m[1])
					id, _ := strconv.Atoi(m[2])
					start, _ := strconv.Atoi(m[3])
					if parent := *d.Attributes[deviceattr.AttrParentUUID].StringValue; minorOf[parent] != minor {
						t.Errorf("%s: the exporter reads parent minor %d; its parent %s has minor %d", d.Name, minor, parent, minorOf[parent])
					}
					key := fmt.Sprintf("%d/%d/%d", minor, id, start)
					if !want[key] {
						t.Errorf("%s: profile ID %d at start %d is no GPU instance profile and placement of %s", d.Name, id, start, model)
					}
					if seen[key] {
						t.Errorf("%s: a second device reads as %s", d.Name, key)
					}
					seen[key] = true
					if q := d.Capacity[deviceattr.CapMemory].Value; q.Value() != int64(memMB[id])<<20 {
						t.Errorf("%s: memory %s, profile ID %d has %d MiB", d.Name, q.String(), id, memMB[id])
					}
					profile := *d.Attributes[deviceattr.AttrProfile].StringValue
					if n, ok := deviceattr.ParseMigDeviceName(d.Name); !ok || n.GIProfileID != id || n.Start != uint32(start) || n.ParentMinor != minor ||
						deviceattr.MigDeviceName(0, profile, 0) != deviceattr.MigDeviceName(0, n.Profile, 0) {
						t.Errorf("%s: ParseMigDeviceName = %+v %v, profile %s", d.Name, n, ok, profile)
					}
				}
			}
			for key := range want {
				if !seen[key] {
					t.Errorf("placement %s (minor/profile ID/start) is not published", key)
				}
			}
		})
	}
	// A static MIG device's name is not taken for a dynamic one's.
	for _, name := range []string{deviceattr.MigDeviceName(0, "1g.10gb", 3), deviceattr.MigDeviceName(5, "7g.80gb", 0)} {
		if dcgmDynamicMig.MatchString(name) {
			t.Errorf("static MIG name %s matches the exporter's dynamic pattern", name)
		}
	}
}
