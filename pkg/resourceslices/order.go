// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"cmp"
	"slices"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// profileMajor puts the dynamic MIG placements of all of a node's GPUs
// profile by profile: every GPU's 1g.10gb placements (GPU by GPU, each
// GPU's in its packing order), then every GPU's 1g.10gb+me placements, and
// so on, smallest profile first. Everything else keeps its place before
// them, GPU by GPU.
//
// Why: the allocator walks a node's devices in published order and stops
// at the first that fits, and every device it passes that is not already
// allocated costs it a CEL evaluation (which builds maps of all the
// device's attributes and capacities) before the shared counters are
// checked; devices allocated to a claim cost only a set lookup. Published
// GPU by GPU, a 1g.10gb pod on a node whose first four GPUs are full
// passes every other placement of those GPUs (80 devices) before it
// reaches the fifth GPU. Profile by profile it passes the whole GPUs and
// the four full GPUs' 1g.10gb placements, which are allocated: the cost
// of a Filter call stops growing with how full the node is (docs/
// performance.md, "Busy fleets").
//
// Nothing a request can get changes: a request of one profile only ever
// matches that profile's devices, whose order among themselves is the
// same as before (GPU by GPU, packing order within a GPU), so it still
// fills partly used GPUs first and lands where it did. Only a request that
// several profiles match (by capacity alone) now gets the smallest
// profile that fits on any GPU rather than on the first GPU with room.
func profileMajor(entries []Entry) []Entry {
	var rest, placements []Entry
	for _, e := range entries {
		if e.Kind == configapi.DynamicMIG {
			placements = append(placements, e)
		} else {
			rest = append(rest, e)
		}
	}
	// Stable: GPU order, then each GPU's packing order, among equals. The
	// key is packingOrder's profile rank (compute slices, then memory),
	// with NVML's profile ID in place of discovery order among equal
	// sizes (NVML lists profiles by ID, so within one GPU the two agree),
	// so that the same profile on several GPUs of one model forms one run.
	slices.SortStableFunc(placements, func(a, b Entry) int {
		return cmp.Or(
			cmp.Compare(a.Profile.Info.SliceCount, b.Profile.Info.SliceCount),
			cmp.Compare(a.Profile.Info.MemorySizeMB, b.Profile.Info.MemorySizeMB),
			cmp.Compare(a.Profile.GIProfileID, b.Profile.GIProfileID),
		)
	})
	return append(rest, placements...)
}
