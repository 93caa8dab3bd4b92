// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func simulatedGPU(t *testing.T, model string) (*nvdev.Inventory, *nvdev.GPU) {
	t.Helper()
	_, inv, err := simulate.Discover(model+"x1"+simulate.MigSuffix, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	return inv, inv.GPUs[0]
}

// layoutsOf lists every set of devices the counters let one GPU hold at
// once, by device name.
func layoutsOf(set resourceapi.CounterSet, devices []resourceapi.Device) map[string]bool {
	var names []string
	for n := range set.Counters {
		names = append(names, n)
	}
	slices.Sort(names)
	placements := make([]migPlacement, len(devices))
	for i, d := range devices {
		placements[i] = migPlacement{entry: Entry{Device: d}}
	}
	uses, capacity := counterMatrix(set, placements, names)
	out := map[string]bool{}
	eachLayout(uses, capacity, func(members []int) {
		var layout []string
		for _, j := range members {
			layout = append(layout, devices[j].Name)
		}
		slices.Sort(layout)
		out[strings.Join(layout, "+")] = true
	})
	return out
}

// TestPrunedCountersAllowTheSameLayouts: on every simulated MIG model, the
// published counters (guards dropped where implied) let exactly the same
// sets of devices, the whole GPU among them, share a GPU as every counter
// did. The H100 table loses both guards.
func TestPrunedCountersAllowTheSameLayouts(t *testing.T) {
	for _, model := range []string{"a100-40gb", "a100-80gb", "a30", "h100", "h200", "b200"} {
		t.Run(model, func(t *testing.T) {
			inv, g := simulatedGPU(t, model)
			fullSet := migCounterSet(g, g.MigProfiles)
			set, entries := partitionableDevices(inv, g, g.MigProfiles)
			var published []resourceapi.Device
			for _, e := range entries {
				published = append(published, e.Device)
			}
			want, got := layoutsOf(fullSet, fullDevices(g, fullSet, entries)), layoutsOf(set, published)
			if len(want) < 20 {
				t.Fatalf("only %d layouts with every counter", len(want))
			}
			for l := range want {
				if !got[l] {
					t.Errorf("layout %s no longer fits", l)
				}
			}
			for l := range got {
				if !want[l] {
					t.Errorf("layout %s fits only without the guards", l)
				}
			}
			t.Logf("%d layouts; counters %d -> %d", len(want), len(fullSet.Counters), len(set.Counters))
			if model == "h100" {
				for _, guard := range guardCounters {
					if _, ok := set.Counters[guard]; ok {
						t.Errorf("H100: guard %s published", guard)
					}
				}
			}
		})
	}
}

// TestGuardKeptWhereNeeded: a table where disjoint memory slices do not
// bound compute or memory keeps the guard that binds, and the allocator's
// layouts stay those of every counter.
func TestGuardKeptWhereNeeded(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(p *nvdev.MigProfile)
		keep string
	}{
		// Four 1g.20gb with two compute slices each need 8 of 7.
		"compute": {func(p *nvdev.MigProfile) {
			if p.Name == "1g.20gb" {
				p.Info.SliceCount = 2
			}
		}, counterComputeSlices},
		// Seven 1g.10gb of 12,000 MiB need more than the 81,152 MiB.
		"memory": {func(p *nvdev.MigProfile) {
			if p.Name == "1g.10gb" {
				p.Info.MemorySizeMB = 12000
			}
		}, deviceattr.CapMemory},
	} {
		t.Run(name, func(t *testing.T) {
			inv, g := simulatedGPU(t, "h100")
			g.MigProfiles = slices.Clone(g.MigProfiles)
			for i := range g.MigProfiles {
				tc.edit(&g.MigProfiles[i])
			}
			set, entries := partitionableDevices(inv, g, g.MigProfiles)
			if _, ok := set.Counters[tc.keep]; !ok {
				t.Fatalf("counter %s dropped; counters %v", tc.keep, keys(set.Counters))
			}
			for _, e := range entries {
				if e.Kind != configapi.DynamicMIG {
					continue
				}
				if _, ok := e.Device.ConsumesCounters[0].Counters[tc.keep]; !ok {
					t.Fatalf("%s does not consume %s", e.Device.Name, tc.keep)
				}
			}
			fullSet := migCounterSet(g, g.MigProfiles)
			var devices []resourceapi.Device
			for _, e := range entries {
				devices = append(devices, e.Device)
			}
			if got, want := len(layoutsOf(set, devices)), len(layoutsOf(fullSet, fullDevices(g, fullSet, entries))); got != want {
				t.Fatalf("%d layouts, want %d", got, want)
			}
		})
	}
}

// fullDevices is entries as published before implied.go: every MIG
// device consumes every counter of its placement, guards included, and the
// whole GPU all of fullSet.
func fullDevices(g *nvdev.GPU, fullSet resourceapi.CounterSet, entries []Entry) []resourceapi.Device {
	var out []resourceapi.Device
	for _, e := range entries {
		d := e.Device.DeepCopy()
		if e.Kind == configapi.DynamicMIG {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{placementConsumption(g, e.Profile, e.Start, e.Size)}
		} else {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: fullSet.Name, Counters: fullSet.Counters}}
		}
		out = append(out, *d)
	}
	return out
}

func keys[V any](m map[string]V) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}
