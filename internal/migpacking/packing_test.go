// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package migpacking

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestPublishedOrderBeatsAscending runs the reduced set (layouts of up to
// three devices) on every model: the published order never packs worse than
// NVML's ascending order, and packs better where ascending loses orders.
func TestPublishedOrderBeatsAscending(t *testing.T) {
	for _, model := range Models {
		t.Run(model, func(t *testing.T) {
			asc, err := Run(t, model, Options{Order: Ascending, MaxDevices: 3})
			if err != nil {
				t.Fatal(err)
			}
			pub, err := Run(t, model, Options{Order: Published, MaxDevices: 3})
			if err != nil {
				t.Fatal(err)
			}
			if asc.Orders() != pub.Orders() || len(asc.Layouts) != len(pub.Layouts) {
				t.Fatalf("the orders see different layouts: %d/%d layouts, %d/%d arrival orders", len(asc.Layouts), len(pub.Layouts), asc.Orders(), pub.Orders())
			}
			t.Logf("ascending %.1f%%, published %.1f%% of %d arrival orders", asc.Percent(), pub.Percent(), pub.Orders())
			if pub.Fitted() < asc.Fitted() || (asc.Fitted() < asc.Orders() && pub.Fitted() == asc.Fitted()) {
				t.Fatalf("published order fits %d of %d arrival orders, ascending %d", pub.Fitted(), pub.Orders(), asc.Fitted())
			}
		})
	}
}

// checkLayouts checks the layouts found with the allocator (single claims
// over the published counters) against the hardware's rule taken straight
// from the placement table: instances of a layout sit at placements whose
// memory slices do not overlap, with no profile above its instance count.
func checkLayouts(t *testing.T, r Report) {
	t.Helper()
	var got []string
	for _, l := range r.Layouts {
		got = append(got, layoutKey(l.Profiles))
	}
	want := tableLayouts(t, r.Model)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: layouts found with the allocator:\n%s\nlayouts the placement table allows:\n%s", r.Model, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// tableLayouts enumerates, without the allocator, the multisets of
// profiles that can be placed on disjoint memory slices.
func tableLayouts(t *testing.T, model string) []string {
	inv, err := discover(model)
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	type spot struct {
		profile int
		mask    uint64
	}
	var spots []spot
	for i, p := range g.MigProfiles {
		for _, pl := range p.Placements {
			spots = append(spots, spot{i, (uint64(1)<<pl.Size - 1) << pl.Start})
		}
	}
	seen := map[string]bool{}
	counts := make([]int, len(g.MigProfiles))
	var walk func(from int, used uint64)
	walk = func(from int, used uint64) {
		var names []string
		for i, n := range counts {
			for k := 0; k < n; k++ {
				names = append(names, g.MigProfiles[i].Name)
			}
		}
		if len(names) > 0 {
			seen[layoutKey(names)] = true
		}
		for j := from; j < len(spots); j++ {
			s := spots[j]
			if used&s.mask != 0 || counts[s.profile] == int(g.MigProfiles[s.profile].Info.InstanceCount) {
				continue
			}
			counts[s.profile]++
			walk(j+1, used|s.mask)
			counts[s.profile]--
		}
	}
	walk(0, 0)
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// layoutKey names a multiset whatever the order of its profiles.
func layoutKey(names []string) string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	return strings.Join(sorted, " + ")
}

func TestMultinomial(t *testing.T) {
	for _, tc := range []struct {
		counts []int
		want   int64
	}{
		{[]int{1}, 1}, {[]int{7}, 1}, {[]int{2, 1, 1}, 12}, {[]int{1, 1, 1, 1}, 24}, {[]int{3, 0, 2}, 10}, {[]int{2, 2, 2, 1}, 630},
	} {
		if got := multinomial(tc.counts); got != tc.want {
			t.Errorf("multinomial(%v) = %d, want %d", tc.counts, got, tc.want)
		}
	}
}

func TestWorstAndString(t *testing.T) {
	r := Report{Layouts: []Layout{
		{Profiles: []string{"1g", "1g", "3g"}, Orders: 3, Fitted: 3},
		{Profiles: []string{"1g", "2g"}, Orders: 2, Fitted: 1},
		{Profiles: []string{"1g", "1g", "2g", "2g"}, Orders: 6, Fitted: 3},
		{Profiles: []string{"2g", "2g", "3g"}, Orders: 3, Fitted: 1},
	}}
	var got []string
	for _, l := range r.Worst(10) {
		got = append(got, fmt.Sprintf("%s %d/%d", l, l.Fitted, l.Orders))
	}
	want := []string{"3g + 2 x 2g 1/3", "2 x 2g + 2 x 1g 3/6", "2g + 1g 1/2"}
	if !slices.Equal(got, want) {
		t.Fatalf("worst: got %q, want %q", got, want)
	}
	if r.Orders() != 14 || r.Fitted() != 8 {
		t.Fatalf("totals %d/%d, want 8/14", r.Fitted(), r.Orders())
	}
	if _, err := Run(t, "a100-80gb", Options{Order: "random"}); err == nil || !strings.Contains(err.Error(), `order "random"`) {
		t.Fatalf("unknown order: err %v", err)
	}
	if _, err := Run(t, "v100", Options{}); err == nil {
		t.Fatal("unknown model: no error")
	}
}
