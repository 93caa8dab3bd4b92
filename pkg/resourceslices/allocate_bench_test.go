// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// BenchmarkAllocateDynamicMIG is the scheduler's cost of one claim on an
// idle 8 x H100 node with dynamic MIG: the allocator looks at devices in
// published order until one matches, so the order sets the cost.
func BenchmarkAllocateDynamicMIG(b *testing.B) {
	inv := simulatedInventory(&testing.T{}, "h100x8")
	c := schedtest.New(b, driverName, "n1", resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true}))
	for _, bc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
	}{
		{"whole-gpu", schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))},
		{"1g.10gb", schedtest.Claim("small", migRequest("mig", "1g.10gb"))},
		{"3g.40gb", schedtest.Claim("large", migRequest("mig", "3g.40gb"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.Deallocate(c.Allocate(bc.claim))
			}
		})
	}
}

// BenchmarkFilterPerNode is what one kube-scheduler Filter call costs per
// node and pod (1.37's allocator with its default features, as
// internal/schedtest sets them) for each layout `make bench-scale` runs, on
// an idle 8 x H100 node: the allocator converts and checks every device of
// the node on every call, so the cost follows the devices published, not
// the one a claim gets. bench-scale's scheduler CPU per pod follows the
// ratios of these figures.
func BenchmarkFilterPerNode(b *testing.B) {
	inv := simulatedInventory(&testing.T{}, "h100x8")
	for _, bc := range []struct {
		name  string
		opts  resourceslices.Options
		claim *resourceapi.ResourceClaim
	}{
		{"whole", resourceslices.Options{}, schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))},
		{"whole-nomonitor", resourceslices.Options{NoMonitorDevices: true}, schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))},
		{"mig-1g", resourceslices.Options{DynamicMIG: true}, schedtest.Claim("small", migRequest("mig", "1g.10gb"))},
		{"mig-whole", resourceslices.Options{DynamicMIG: true}, schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))},
		{"mig3p-1g", resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.10gb", "3g.40gb", "7g.80gb"}}, schedtest.Claim("small", migRequest("mig", "1g.10gb"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			res := resourceslices.Build("n1", inv, bc.opts)
			c := schedtest.New(b, driverName, "n1", res)
			devices := 0
			for _, s := range res.Pools["n1"].Slices {
				devices += len(s.Devices)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.Deallocate(c.Allocate(bc.claim))
			}
			b.ReportMetric(float64(devices), "devices")
		})
	}
}
