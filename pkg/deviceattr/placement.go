// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package deviceattr

import (
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// MemorySlicePrefix starts the names of the counters a dynamic MIG GPU
// shares, one per memory slice: "memory-slice-0" ... (counter names are DNS
// labels; the API rejects camelCase there).
const MemorySlicePrefix = "memory-slice-"

// MemorySliceCounter is the counter of memory slice i.
func MemorySliceCounter(i int) string { return MemorySlicePrefix + strconv.Itoa(i) }

// MigPlacement reads a dynamic MIG device's placement from the memory
// slices it consumes (its memory-slice-<i> counters): the first slice and
// how many. MIG devices do not publish their placement as attributes
// (pkg/resourceslices MigDetails); ok is false for a device that consumes
// no memory slice (a static MIG device, which the admin placed). Only for
// MIG devices: the whole GPU of a dynamic-MIG GPU consumes every slice.
func MigPlacement(d *resourceapi.Device) (start, size int, ok bool) {
	start = -1
	for _, c := range d.ConsumesCounters {
		for name := range c.Counters {
			rest, found := strings.CutPrefix(string(name), MemorySlicePrefix)
			if !found {
				continue
			}
			i, err := strconv.Atoi(rest)
			if err != nil {
				continue
			}
			if start < 0 || i < start {
				start = i
			}
			size++
		}
	}
	return max(start, 0), size, size > 0
}
