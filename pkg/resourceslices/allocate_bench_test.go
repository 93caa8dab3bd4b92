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
