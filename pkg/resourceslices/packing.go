// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"cmp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// The order of a GPU's devices is the only say a driver has in where the
// scheduler puts MIG devices. The structured allocator gives a request the
// first free device that matches, in the order of the pool's slices (sorted
// by name, which the resourceslice controller prefixes with the slice's
// index) and of the devices within them; pods arrive one by one, so each
// takes the first placement of its profile that is still free. In NVML's
// ascending order (which NVIDIA's DRA driver publishes) a 3g.40gb takes
// placement 0 of an A100-80GB, a 2g.20gb then 4 and a 1g.10gb 6, and a
// second 1g.10gb finds no room although 3g@4 + 2g@0 + 1g@2 + 1g@3 fits: a
// third of the arrival orders of layouts that fit the GPU fail that way.
// In the order below 8.7% do (`make bench-packing` counts them through the
// real allocator; the README has the table per model).
//
// The rule, applied to each GPU's own placement table so that it carries
// over to tables not seen yet:
//
//  1. Profiles smallest first (compute slices, then memory; NVML's order
//     among equals, which puts a "+me" profile after its plain sibling): a
//     request that selects by capacity gets the smallest profile that fits.
//  2. Within a profile, placements that waste nothing before those that
//     do. A placement wastes the compute slices and memory slices that no
//     layout containing it can use: on eight-slice GPUs 1g@6 strands memory
//     slice 7, 3g@0 leaves a compute slice idle (its only partner is 3g@4:
//     6 of 7), and a 1g.20gb anywhere but 6 gives one compute slice a pair
//     of memory slices a 2g could use with two (at 6, where no 2g fits, it
//     wastes nothing). The largest instances keep their waste-free
//     placements: 3g@4 and 4g@0 together fill the GPU.
//  3. Otherwise NVML's order, lowest start first: small instances fill the
//     GPU from placement 0 up, the half that 4g@0 would take, and leave
//     3g@4 free. That loses some layouts with a 4g whose small instances
//     arrive first, and keeps 3g + 2g + 1g + 1g whole in every arrival
//     order: filling from the top instead fits 92.5% of arrival orders
//     rather than 91.3%, but 3g + 2g + 1g + 1g then fails in 9 of its 12
//     orders (2g@4, 3g@0, 1g@6, and no room for the second 1g).
//  4. The whole GPU first, as before: the shipped classes never let a
//     request choose between a whole GPU and a MIG device, so its place does
//     not change what gets allocated, only what a request looks at before
//     it finds a match. A whole-GPU claim on an 8 x H100 node took 0.6 ms
//     in the allocator with the whole GPU first and 1.8 ms with it moved
//     after its 25 MIG devices, each of which the claim evaluates first.
//
// An offline search (coordinate descent over each profile's placement
// permutations, from a dozen starts) found no static order that keeps 3g +
// 2g + 1g + 1g whole in every arrival order and fits more than 2 arrival
// orders (of 1,322 on an eight-slice GPU) beyond this rule's.
//
// Across GPUs the order stays GPU by GPU, so a request fills the first GPU
// with room (partly used ones first, in GPU order) and leaves later GPUs
// whole for whole-GPU claims. The rule depends on nothing but the placement
// table and the counters, so the order is the same at every start, and it
// neither adds devices nor counters.

// migPlacement is one MIG device of a partitionable GPU, with what it
// consumes from its GPU's counter set.
type migPlacement struct {
	entry   Entry
	profile nvdev.MigProfile
}

// packingOrder returns a GPU's MIG devices in the order described above.
func packingOrder(set resourceapi.CounterSet, placements []migPlacement) []Entry {
	waste := placementWaste(set, placements)
	idx := make([]int, len(placements))
	for i := range idx {
		idx[i] = i
	}
	rank := profileRanks(placements)
	slices.SortStableFunc(idx, func(a, b int) int {
		pa, pb := placements[a], placements[b]
		// Stable: NVML's order among equals.
		return cmp.Or(
			cmp.Compare(rank[pa.profile.Name], rank[pb.profile.Name]),
			cmp.Compare(waste[a], waste[b]),
		)
	})
	out := make([]Entry, 0, len(placements))
	for _, i := range idx {
		out = append(out, placements[i].entry)
	}
	return out
}

// profileRanks ranks profiles smallest first: compute slices, then memory,
// then the order they were discovered in.
func profileRanks(placements []migPlacement) map[string]int {
	var profiles []nvdev.MigProfile
	seen := map[string]bool{}
	for _, p := range placements {
		if !seen[p.profile.Name] {
			seen[p.profile.Name] = true
			profiles = append(profiles, p.profile)
		}
	}
	slices.SortStableFunc(profiles, func(a, b nvdev.MigProfile) int {
		return cmp.Or(cmp.Compare(a.Info.SliceCount, b.Info.SliceCount), cmp.Compare(a.Info.MemorySizeMB, b.Info.MemorySizeMB))
	})
	rank := map[string]int{}
	for i, p := range profiles {
		rank[p.Name] = i
	}
	return rank
}

// placementWaste is, per placement, the compute slices plus memory slices
// that stay unusable in the fullest layout containing it (fullest counted
// separately for compute and for memory). One walk visits every layout of
// the GPU once (2,319 on an eight-slice GPU, under a millisecond).
func placementWaste(set resourceapi.CounterSet, placements []migPlacement) []int64 {
	names := make([]string, 0, len(set.Counters))
	for n := range set.Counters {
		names = append(names, n)
	}
	slices.Sort(names)
	uses, capacity := counterMatrix(set, placements, names)
	var totalCompute, totalMemSlices int64
	compute := make([]int64, len(placements))
	memSlices := make([]int64, len(placements))
	for i, n := range names {
		switch {
		case n == counterComputeSlices:
			totalCompute = capacity[i]
		case strings.HasPrefix(n, deviceattr.MemorySlicePrefix):
			totalMemSlices += capacity[i]
		default:
			continue
		}
		for j := range placements {
			if n == counterComputeSlices {
				compute[j] = uses[j][i]
			} else {
				memSlices[j] += uses[j][i]
			}
		}
	}

	bestCompute := make([]int64, len(placements))
	bestMem := make([]int64, len(placements))
	eachLayout(uses, capacity, func(members []int) {
		var c, m int64
		for _, j := range members {
			c += compute[j]
			m += memSlices[j]
		}
		for _, j := range members {
			bestCompute[j] = max(bestCompute[j], c)
			bestMem[j] = max(bestMem[j], m)
		}
	})

	waste := make([]int64, len(placements))
	for j := range placements {
		waste[j] = totalCompute - bestCompute[j] + totalMemSlices - bestMem[j]
	}
	return waste
}

func countersFit(used, use, capacity []int64) bool {
	for i, v := range use {
		if used[i]+v > capacity[i] {
			return false
		}
	}
	return true
}

func addCounters(used, use []int64, sign int64) {
	for i, v := range use {
		used[i] += sign * v
	}
}
