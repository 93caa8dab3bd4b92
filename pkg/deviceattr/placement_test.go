// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package deviceattr

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// TestMigPlacement reads the placement from the memory-slice counters a
// device consumes, whatever else it consumes, and none from a device
// without them (pkg/resourceslices' TestMigPlacementFromCounters checks it
// on the devices the node publishes).
func TestMigPlacement(t *testing.T) {
	consumes := func(names ...string) *resourceapi.Device {
		c := map[string]resourceapi.Counter{}
		for _, n := range names {
			c[n] = resourceapi.Counter{}
		}
		return &resourceapi.Device{ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: "gpu-0-counters", Counters: c}}}
	}
	for _, c := range []struct {
		d           *resourceapi.Device
		start, size int
		ok          bool
	}{
		{consumes(MemorySliceCounter(5), MemorySliceCounter(4), "compute-slices", CapMemory), 4, 2, true},
		{consumes(MemorySliceCounter(0)), 0, 1, true},
		{consumes("compute-slices", "memory-slice-x"), 0, 0, false},
		{&resourceapi.Device{}, 0, 0, false},
	} {
		start, size, ok := MigPlacement(c.d)
		if start != c.start || size != c.size || ok != c.ok {
			t.Errorf("MigPlacement(%v) = %d, %d, %v; want %d, %d, %v", c.d.ConsumesCounters, start, size, ok, c.start, c.size, c.ok)
		}
	}
}
