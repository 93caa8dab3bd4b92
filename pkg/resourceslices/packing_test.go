// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// permutations returns every distinct order of items.
func permutations(items []string) [][]string {
	if len(items) == 0 {
		return [][]string{nil}
	}
	var out [][]string
	seen := map[string]bool{}
	for i, first := range items {
		if seen[first] {
			continue
		}
		seen[first] = true
		rest := append(slices.Clone(items[:i]), items[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{first}, p...))
		}
	}
	return out
}

// TestIssueLayoutFitsInEveryArrivalOrder: four pods asking for 3g.40gb,
// 2g.20gb, 1g.10gb and 1g.10gb, allocated one by one as the scheduler
// does, all get a device whatever order they arrive in (in NVML's
// ascending order, 3g, 2g, 1g left the fourth pod Pending).
func TestIssueLayoutFitsInEveryArrivalOrder(t *testing.T) {
	for _, profile := range []string{"a100-80gbx1" + simulate.MigSuffix, "h100x1"} {
		orders := permutations([]string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"})
		if len(orders) != 12 {
			t.Fatalf("%d distinct orders, want 12", len(orders))
		}
		for _, order := range orders {
			c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, profile), resourceslices.Options{DynamicMIG: true}))
			var got []string
			for i, p := range order {
				devices := schedtest.Devices(c.Allocate(schedtest.Claim(fmt.Sprintf("pod-%d", i), migRequest("mig", p))))
				if len(devices) != 1 {
					t.Fatalf("%s, arrival order %v: pod %d (%s) found no device after %v", profile, order, i, p, got)
				}
				got = append(got, devices[0])
			}
		}
	}
}

// TestMigFillsTheFirstGPUWithRoom: single MIG claims fill a partly used
// GPU before an empty one, so that whole GPUs stay free for whole-GPU
// claims.
func TestMigFillsTheFirstGPUWithRoom(t *testing.T) {
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x2"), resourceslices.Options{DynamicMIG: true}))
	parentOf := func(name string) int64 {
		var minor int64
		if _, err := fmt.Sscanf(name, "gpu-%d-mig-", &minor); err != nil {
			t.Fatalf("%s is not a MIG device name: %v", name, err)
		}
		return minor
	}
	mig := func(i int, profile string) string {
		got := schedtest.Devices(c.Allocate(schedtest.Claim(fmt.Sprintf("mig-%d", i), migRequest("mig", profile))))
		if len(got) != 1 {
			t.Fatalf("claim %d (%s): got %v", i, profile, got)
		}
		return got[0]
	}
	if d := mig(0, "3g.40gb"); parentOf(d) != 0 {
		t.Fatalf("first MIG claim got %s, want a device of gpu-0", d)
	}
	if got := schedtest.Devices(c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1)))); !slices.Equal(got, []string{"gpu-1"}) {
		t.Fatalf("whole-GPU claim got %v, want the untouched gpu-1", got)
	}
	c = schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x2"), resourceslices.Options{DynamicMIG: true}))
	// 3g + 2g + 2 x 1g fill gpu-0's seven compute slices; only then gpu-1.
	for i, p := range []string{"1g.10gb", "3g.40gb", "1g.10gb", "2g.20gb"} {
		if d := mig(i, p); parentOf(d) != 0 {
			t.Fatalf("claim %d (%s) got %s while gpu-0 had room", i, p, d)
		}
	}
	if d := mig(4, "1g.10gb"); parentOf(d) != 1 {
		t.Fatalf("claim on a full gpu-0 got %s", d)
	}
}

// TestPlacementOrder pins the rule of packing.go on the eight-slice table
// (A100, H100, H200): per profile, the placements that waste nothing in
// NVML's order, then those that strand a compute or memory slice (1g@6,
// 1g.20gb off 6, 3g@0); profiles smallest first; the whole GPU first. The
// devices and their counters are those of the table, only reordered.
func TestPlacementOrder(t *testing.T) {
	inv := simulatedInventory(t, "h100x1")
	res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
	var names []string
	counters := 0
	for _, s := range res.Pools["n1"].Slices {
		for _, cs := range s.SharedCounters {
			counters += len(cs.Counters)
		}
		for _, d := range s.Devices {
			if !deviceattr.IsMonitorDeviceName(d.Name) { // monitor_test.go
				names = append(names, d.Name)
			}
		}
	}
	want := []string{
		"1g10gb-19-0", "1g10gb-19-1", "1g10gb-19-2", "1g10gb-19-3", "1g10gb-19-4", "1g10gb-19-5", "1g10gb-19-6",
		"1g10gbme-20-0", "1g10gbme-20-1", "1g10gbme-20-2", "1g10gbme-20-3", "1g10gbme-20-4", "1g10gbme-20-5", "1g10gbme-20-6",
		"1g20gb-15-6", "1g20gb-15-0", "1g20gb-15-2", "1g20gb-15-4",
		"2g20gb-14-0", "2g20gb-14-2", "2g20gb-14-4",
		"3g40gb-9-4", "3g40gb-9-0",
		"4g40gb-5-0", "7g80gb-0-0",
	}
	for i, w := range want {
		want[i] = "gpu-0-mig-" + w
	}
	want = append([]string{"gpu-0"}, want...)
	if !slices.Equal(names, want) {
		t.Fatalf("published order:\n%s\nwant:\n%s", strings.Join(names, " "), strings.Join(want, " "))
	}
	// 8 memory slices and the 1g.10gb+me cap; compute slices and memory
	// are implied by the memory slices on an H100 (implied.go).
	if counters != 9 {
		t.Fatalf("%d counters, want 9", counters)
	}
}

// TestPlacementOrderIsStable: a restarted plugin (a new discovery of the
// same node) publishes the devices in the same order.
func TestPlacementOrderIsStable(t *testing.T) {
	order := func() []string {
		var names []string
		for _, s := range resourceslices.Build("n1", simulatedInventory(t, "h100x8"), resourceslices.Options{DynamicMIG: true}).Pools["n1"].Slices {
			for _, d := range s.Devices {
				names = append(names, d.Name)
			}
		}
		return names
	}
	first := order()
	for i := 0; i < 5; i++ {
		if got := order(); !slices.Equal(got, first) {
			t.Fatalf("build %d published another order:\n%v\nfirst:\n%v", i+2, got, first)
		}
	}
	// Whole GPUs first, GPU by GPU; then the placements profile by profile
	// (order.go), and within one profile GPU by GPU: a profile's minors
	// never go down, and a profile's run is not interrupted by another.
	prevMinor := map[string]int{}
	var profiles []string
	for _, n := range first {
		if deviceattr.IsMonitorDeviceName(n) {
			continue // all after the workload devices (monitor_test.go)
		}
		var minor int
		var profile string
		if _, err := fmt.Sscanf(n, "gpu-%d-mig-%s", &minor, &profile); err != nil {
			if len(profiles) > 0 && profiles[len(profiles)-1] != "whole" {
				t.Fatalf("whole GPU %s published after MIG placements", n)
			}
			profile = "whole"
			fmt.Sscanf(n, "gpu-%d", &minor)
		} else {
			profile = profile[:strings.LastIndex(profile, "-")]
		}
		if len(profiles) == 0 || profiles[len(profiles)-1] != profile {
			if slices.Contains(profiles, profile) {
				t.Fatalf("%s: profile %s published again after %v", n, profile, profiles)
			}
			profiles = append(profiles, profile)
		}
		if minor < prevMinor[profile] {
			t.Fatalf("%s published after a %s device of gpu-%d", n, profile, prevMinor[profile])
		}
		prevMinor[profile] = minor
	}
	want := []string{"whole", "1g10gb-19", "1g10gbme-20", "1g20gb-15", "2g20gb-14", "3g40gb-9", "4g40gb-5", "7g80gb-0"}
	if !slices.Equal(profiles, want) {
		t.Fatalf("profile runs %v, want %v", profiles, want)
	}
}
