// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// gpuMajor rewrites a pool's slices into the order published before
// order.go: each GPU's devices together (whole GPU first, then its
// placements in packing order), GPU by GPU, monitors last. A stable sort
// by parent minor gets it back, since profile by profile keeps each GPU's
// own order.
func gpuMajor(t *testing.T, res []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	var devices []resourceapi.Device
	var out []*resourceapi.ResourceSlice
	for _, s := range res {
		if len(s.Spec.Devices) == 0 {
			out = append(out, s)
			continue
		}
		devices = append(devices, s.Spec.Devices...)
	}
	minor := func(d resourceapi.Device) int {
		var m int
		if deviceattr.IsMonitorDeviceName(d.Name) {
			return math.MaxInt
		}
		if _, err := fmt.Sscanf(d.Name, "gpu-%d", &m); err != nil {
			t.Fatalf("device %s: %v", d.Name, err)
		}
		return m
	}
	slices.SortStableFunc(devices, func(a, b resourceapi.Device) int { return minor(a) - minor(b) })
	// Same slice boundaries as published: only the order differs.
	i := 0
	for _, s := range res {
		if len(s.Spec.Devices) == 0 {
			continue
		}
		c := s.DeepCopy()
		c.Spec.Devices = devices[i : i+len(s.Spec.Devices)]
		i += len(s.Spec.Devices)
		out = append(out, c)
	}
	return out
}

// Publishing placements profile by profile changes no allocation of a
// request for one profile or for a whole GPU: random arrivals and
// departures of such claims on four dynamic-MIG H100s get the same
// devices as in the GPU-by-GPU order, claim for claim.
func TestProfileMajorOrderAllocatesAsGPUMajor(t *testing.T) {
	res := resourceslices.Build("n1", simulatedInventory(t, "h100x4"), resourceslices.Options{DynamicMIG: true})
	published := schedtest.New(t, driverName, "n1", res)
	before := schedtest.NewFromSlices(t, "n1", gpuMajor(t, published.Slices))
	profiles := []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "whole"}
	for seed := uint64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		type held struct{ a, b *resourceapi.AllocationResult }
		var live []held
		for step := range 120 {
			if len(live) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(live))
				published.Deallocate(live[i].a)
				before.Deallocate(live[i].b)
				live = slices.Delete(live, i, i+1)
				continue
			}
			p := profiles[r.IntN(len(profiles))]
			claim := func() *resourceapi.ResourceClaim {
				if p == "whole" {
					return schedtest.Claim("c", schedtest.Request("gpu", "gpu.nvidia.com", 1))
				}
				return schedtest.Claim("c", migRequest("mig", p))
			}
			a, b := published.Allocate(claim()), before.Allocate(claim())
			if got, want := schedtest.Devices(a), schedtest.Devices(b); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: %s got %v, GPU by GPU %v", seed, step, p, got, want)
			}
			if a != nil {
				live = append(live, held{a, b})
			}
		}
		for _, h := range live {
			published.Deallocate(h.a)
			before.Deallocate(h.b)
		}
	}
}

// A dynamic MIG device's placement is the memory slices it consumes, the
// same as its name and its entry say.
func TestMigPlacementFromCounters(t *testing.T) {
	table := resourceslices.NewTable(simulatedInventory(t, "h100x1"), resourceslices.Options{DynamicMIG: true})
	n := 0
	for _, e := range table.Entries {
		if e.Kind != "dynamic-mig" {
			continue
		}
		n++
		start, size, ok := deviceattr.MigPlacement(&e.Device)
		if !ok || start != int(e.Start) || size != int(e.Size) {
			t.Errorf("%s: placement %d+%d (%v), want %d+%d", e.Device.Name, start, size, ok, e.Start, e.Size)
		}
	}
	if n != 25 {
		t.Fatalf("%d placements, want 25", n)
	}
}
