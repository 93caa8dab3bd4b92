// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

var fewProfiles = []string{"1g.10gb", "3g.40gb", "7g.80gb"}

func fewProfilesNode(t *testing.T) *schedtest.Cluster {
	o := resourceslices.Options{DynamicMIG: true, MigProfiles: fewProfiles}
	return schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x1"), o))
}

// TestMigProfilesPublishOnlyListed: the whole GPU and the listed profiles'
// placements, smallest profile first and each in packing order (3g@4
// before 3g@0, which leaves a compute slice idle), and nothing else.
func TestMigProfilesPublishOnlyListed(t *testing.T) {
	got := deviceNames(t, "h100x1", resourceslices.Options{DynamicMIG: true, MigProfiles: fewProfiles})
	want := []string{"gpu-0"}
	for i := range 7 {
		want = append(want, fmt.Sprintf("gpu-0-mig-1g10gb-19-%d", i))
	}
	want = append(want, "gpu-0-mig-3g40gb-9-4", "gpu-0-mig-3g40gb-9-0", "gpu-0-mig-7g80gb-0-0")
	if !slices.Equal(got, want) {
		t.Fatalf("published %v\nwant %v", got, want)
	}
	// The whole GPU's eight memory slices; no instance cap of the unlisted
	// 1g.10gb+me, and no guard these placements cannot exhaust.
	var counters []string
	for _, s := range resourceslices.Build("n1", simulatedInventory(t, "h100x1"), resourceslices.Options{DynamicMIG: true, MigProfiles: fewProfiles}).Pools["n1"].Slices {
		for _, set := range s.SharedCounters {
			for name := range set.Counters {
				counters = append(counters, name)
			}
		}
	}
	slices.Sort(counters)
	if want := []string{"memory-slice-0", "memory-slice-1", "memory-slice-2", "memory-slice-3", "memory-slice-4", "memory-slice-5", "memory-slice-6", "memory-slice-7"}; !slices.Equal(counters, want) {
		t.Fatalf("counters %v, want %v", counters, want)
	}
}

// TestMigProfilesAllocation runs the listed profiles through the
// scheduler's allocator: the counters of the whole GPU still hold.
func TestMigProfilesAllocation(t *testing.T) {
	c := fewProfilesNode(t)
	for i := range 7 {
		if got := c.Allocate(schedtest.Claim(fmt.Sprintf("c%d", i), migRequest("mig", "1g.10gb"))); got == nil {
			t.Fatalf("1g.10gb #%d not allocated", i+1)
		}
	}
	if got := c.Allocate(schedtest.Claim("eighth", migRequest("mig", "1g.10gb"))); got != nil {
		t.Fatalf("an eighth 1g.10gb got %v", schedtest.Devices(got))
	}

	c = fewProfilesNode(t)
	if got := c.Allocate(schedtest.Claim("3g+3g", migRequest("a", "3g.40gb"), migRequest("b", "3g.40gb"))); got == nil {
		t.Fatal("3g.40gb + 3g.40gb does not fit")
	}
	if got := c.Allocate(schedtest.Claim("more", migRequest("a", "1g.10gb"))); got != nil {
		t.Fatalf("1g.10gb %v allocated beside two 3g.40gb", schedtest.Devices(got))
	}

	c = fewProfilesNode(t)
	if got := c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))); got == nil {
		t.Fatal("whole GPU not allocated on an idle GPU")
	}
	for _, p := range fewProfiles {
		if got := c.Allocate(schedtest.Claim("mig", migRequest("mig", p))); got != nil {
			t.Fatalf("%s %v allocated on a GPU in use whole", p, schedtest.Devices(got))
		}
	}

	c = fewProfilesNode(t)
	for _, p := range []string{"2g.20gb", "1g.10gb+me", "1g.20gb", "4g.40gb"} {
		if got := c.Allocate(schedtest.Claim("unlisted", migRequest("mig", p))); got != nil {
			t.Fatalf("%s is not listed, yet %v was allocated", p, schedtest.Devices(got))
		}
	}
}

// TestMigProfilesInstanceCap: a listed profile that the hardware allows
// fewer instances of than it has placements keeps its cap.
func TestMigProfilesInstanceCap(t *testing.T) {
	o := resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.10gb+me"}}
	if got := deviceNames(t, "h100x1", o); len(got) != 8 {
		t.Fatalf("published %v, want the GPU and seven placements", got)
	}
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x1"), o))
	if got := c.Allocate(schedtest.Claim("a", migRequest("mig", "1g.10gb+me"))); got == nil {
		t.Fatal("1g.10gb+me not allocated")
	}
	if got := c.Allocate(schedtest.Claim("b", migRequest("mig", "1g.10gb+me"))); got != nil {
		t.Fatalf("a second 1g.10gb+me got %v; the H100 has one", schedtest.Devices(got))
	}
}

// TestNoListedProfileIsNotPartitionable: a GPU none of whose profiles is
// listed (a mixed fleet's list on another model) is published exactly as
// without dynamic MIG: whole (no counters, so prepare leaves MIG mode
// alone), shareable, or, in MIG mode with nothing in it, not at all.
func TestNoListedProfileIsNotPartitionable(t *testing.T) {
	for _, profile := range []string{"h100x1", "h100x1" + simulate.MigSuffix, "a100-80gbx1", "a100-80gbx1" + simulate.MigSuffix, "b200x2"} {
		inv := simulatedInventory(t, profile)
		for _, fractional := range []bool{false, true} {
			got := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true, FractionalMemory: fractional, MigProfiles: []string{"1g.5gb"}})
			want := resourceslices.Build("n1", inv, resourceslices.Options{FractionalMemory: fractional})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s, fractional=%v: published differently from a node without dynamic MIG", profile, fractional)
			}
			for _, g := range inv.GPUs {
				if m := resourceslices.ModeOf(g, resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.5gb"}}); m == resourceslices.DynamicMIG {
					t.Errorf("%s: ModeOf says dynamic MIG", profile)
				}
			}
		}
	}
	// The same list on a GPU that has the profile: dynamic MIG with it.
	got := deviceNames(t, "a100-40gbx1"+simulate.MigSuffix, resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.5gb"}})
	if len(got) != 7 || got[0] != "gpu-0-mig-1g5gb-19-0" {
		t.Fatalf("A100-40GB in MIG mode, 1g.5gb listed: published %v", got)
	}
}

// TestHeldMigProfilesStayPublished: a profile dropped from the list while
// the checkpoint holds a device of it stays published on that GPU, so its
// claim can be unprepared and the scheduler counts what it occupies.
func TestHeldMigProfilesStayPublished(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	uuid := inv.GPUs[0].UUID
	o := resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.10gb"},
		DynamicParents: map[string]bool{uuid: true}, HeldMigProfiles: map[string][]string{uuid: {"2g.20gb"}}}
	res := resourceslices.Build("n1", inv, o)
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Pools["n1"].Slices {
		for _, d := range s.Devices {
			names = append(names, d.Name)
		}
	}
	if !slices.Contains(names, "gpu-0-mig-2g20gb-14-0") || slices.Contains(names, "gpu-1-mig-2g20gb-14-0") {
		t.Fatalf("2g.20gb held on gpu-0 only; published %v", names)
	}
}

func TestAbsentMigProfiles(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	if got := resourceslices.AbsentMigProfiles(inv, []string{"1g.10gb", "1g.5gb", "1g.10gb+me", "1g.5gb"}); !slices.Equal(got, []string{"1g.5gb"}) {
		t.Fatalf("absent %v, want [1g.5gb]", got)
	}
	names := resourceslices.MigProfileNames(inv)
	if len(names) != 7 || !slices.Contains(names, "1g.10gb+me") {
		t.Fatalf("profiles of an H100 node: %v", names)
	}
}
