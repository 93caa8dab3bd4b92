// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// The scheduler pays for every counter a device consumes, on every node it
// filters, for every pod: the 1.37 allocator converted and validated each
// consumption of each device of a node in each Filter call (`make
// bench-scale` profiled it at over a fifth of the scheduler's CPU with
// dynamic MIG); 1.38's converts slices once but still books the counters
// of a pool's allocated devices and checks those of each device it tries.
// So a counter that can never run out is not published.
//
// The compute-slices and memory counters are guards: the memory slices
// already keep overlapping placements apart, and on the GPUs known today
// no set of placements with disjoint memory slices (and within the
// instance caps) needs more compute slices or memory than the GPU has
// (seven compute slices and eight memory slices on an H100: 1g.20gb@6
// beside 1g.10gb@0..5 uses seven). Whether that holds is decided per GPU
// from its own placement table, by walking every such set, so a table
// where it does not hold keeps the guard.
var guardCounters = []string{counterComputeSlices, deviceattr.CapMemory}

// pruneImpliedCounters drops from the counter set, and from what each
// device consumes, the guard counters that no layout the other counters
// allow can exhaust. The whole GPU keeps consuming every remaining
// counter, so it still excludes every MIG device of its GPU.
func pruneImpliedCounters(set *resourceapi.CounterSet, devices []Entry, placements []migPlacement) {
	implied := impliedGuards(*set, placements)
	if len(implied) == 0 {
		return
	}
	set.Counters = without(set.Counters, implied)
	for i := range devices {
		for j := range devices[i].Device.ConsumesCounters {
			c := &devices[i].Device.ConsumesCounters[j]
			if c.CounterSet != set.Name {
				continue
			}
			c.Counters = without(c.Counters, implied)
		}
	}
}

// without copies counters but for the named ones: a device's map may be
// shared (the whole GPU's is built from the set's).
func without(counters map[string]resourceapi.Counter, names []string) map[string]resourceapi.Counter {
	out := make(map[string]resourceapi.Counter, len(counters))
	for name, c := range counters {
		if !slices.Contains(names, name) {
			out[name] = c
		}
	}
	return out
}

// impliedGuards returns the guard counters of set that the most any layout
// of placements (fitting every non-guard counter) consumes does not exceed.
func impliedGuards(set resourceapi.CounterSet, placements []migPlacement) []string {
	var others []string
	for name := range set.Counters {
		if !slices.Contains(guardCounters, name) {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	uses, capacity := counterMatrix(set, placements, others)
	guards, guardCap := counterMatrix(set, placements, guardCounters)
	most := make([]int64, len(guardCounters))
	eachLayout(uses, capacity, func(members []int) {
		for g := range guardCounters {
			var sum int64
			for _, j := range members {
				sum += guards[j][g]
			}
			most[g] = max(most[g], sum)
		}
	})
	var implied []string
	for g, name := range guardCounters {
		if _, published := set.Counters[name]; published && most[g] <= guardCap[g] {
			implied = append(implied, name)
		}
	}
	return implied
}

// counterMatrix returns what each placement consumes of the named counters
// and the set's capacity of each (0 where the set lacks one).
func counterMatrix(set resourceapi.CounterSet, placements []migPlacement, names []string) (uses [][]int64, capacity []int64) {
	capacity = make([]int64, len(names))
	for i, n := range names {
		if c, ok := set.Counters[n]; ok {
			capacity[i] = c.Value.Value()
		}
	}
	uses = make([][]int64, len(placements))
	for j, p := range placements {
		uses[j] = make([]int64, len(names))
		for _, c := range p.entry.Device.ConsumesCounters {
			for i, n := range names {
				if q, ok := c.Counters[n]; ok {
					uses[j][i] = q.Value.Value()
				}
			}
		}
	}
	return uses, capacity
}

// eachLayout calls visit once with every set of placements (indexes into
// uses, ascending) that fits capacity together, the empty set included.
// An eight-slice GPU has 2,319 such sets.
func eachLayout(uses [][]int64, capacity []int64, visit func(members []int)) {
	used := make([]int64, len(capacity))
	var members []int
	var walk func(from int)
	walk = func(from int) {
		visit(members)
		for j := from; j < len(uses); j++ {
			if !countersFit(used, uses[j], capacity) {
				continue
			}
			addCounters(used, uses[j], 1)
			members = append(members, j)
			walk(j + 1)
			members = members[:len(members)-1]
			addCounters(used, uses[j], -1)
		}
	}
	walk(0)
}
