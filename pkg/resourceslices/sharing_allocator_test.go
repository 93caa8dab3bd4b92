// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

func memShare(name, memory string) *resourceapi.ResourceClaim {
	return schedtest.Claim(name, schedtest.WithCapacity(schedtest.Request("gpu", "gpu.nvidia.com", 1), map[resourceapi.QualifiedName]string{"memory": memory}))
}

func TestMemoryFractionSharing(t *testing.T) {
	res := resourceslices.Build("n1", simulatedInventory(t, "h100x1"), resourceslices.Options{FractionalMemory: true})
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	c := schedtest.New(t, driverName, "n1", res)
	shares := map[string]bool{}
	for i := 0; i < 4; i++ {
		got := c.Allocate(memShare(fmt.Sprintf("share-%d", i), "20Gi"))
		if got == nil {
			t.Fatalf("share %d of 20Gi refused on an 80Gi H100", i+1)
		}
		r := got.Devices.Results[0]
		if r.ShareID == nil || quantity(r.ConsumedCapacity, "memory") != "20Gi" {
			t.Fatalf("share %d: shareID %v consumed %v", i+1, r.ShareID, r.ConsumedCapacity)
		}
		shares[string(*r.ShareID)] = true
	}
	if len(shares) != 4 {
		t.Fatalf("want 4 distinct share IDs, got %v", shares)
	}
	if got := c.Allocate(memShare("fifth", "20Gi")); got != nil {
		t.Fatalf("a fifth 20Gi share fit on an 80Gi GPU: %v", got.Devices.Results)
	}
	if got := c.Allocate(memShare("tiny", "1Gi")); got != nil {
		t.Fatal("a 1Gi share fit on a GPU whose memory is fully shared out")
	}
}

func TestMemoryFractionRoundsUpAndMixesWithWholeGPUs(t *testing.T) {
	res := resourceslices.Build("n1", simulatedInventory(t, "h100x2"), resourceslices.Options{FractionalMemory: true, FractionalGPUs: []int{1}})
	c := schedtest.New(t, driverName, "n1", res)
	// Unsized claims take a whole GPU: gpu-0 (exclusive) comes first.
	whole := c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1)))
	if whole == nil || whole.Devices.Results[0].Device != "gpu-0" {
		t.Fatalf("whole-GPU claim: %+v", whole)
	}
	// 1.5Gi is rounded up to the 1Gi step.
	got := c.Allocate(memShare("odd", "1536Mi"))
	if got == nil || got.Devices.Results[0].Device != "gpu-1" || quantity(got.Devices.Results[0].ConsumedCapacity, "memory") != "2Gi" {
		t.Fatalf("1.5Gi share: %+v", got)
	}
	// A claim without a memory request takes the default (all memory) of a
	// shareable GPU, so it cannot join a GPU that is already shared.
	if got := c.Allocate(schedtest.Claim("whole-2", schedtest.Request("gpu", "gpu.nvidia.com", 1))); got != nil {
		t.Fatalf("an unsized claim took the already shared GPU: %+v", got.Devices.Results)
	}
	// Shares beyond the memory left are refused; compute shares are checked too.
	if got := c.Allocate(memShare("too-big", "79Gi")); got != nil {
		t.Fatal("79Gi fit next to a 2Gi share on an 80Gi GPU")
	}
	half := schedtest.WithCapacity(schedtest.Request("gpu", "gpu.nvidia.com", 1), map[resourceapi.QualifiedName]string{"memory": "10Gi", "computePercentage": "60"})
	if got := c.Allocate(schedtest.Claim("c1", half)); got == nil {
		t.Fatal("10Gi + 60% compute refused")
	}
	if got := c.Allocate(schedtest.Claim("c2", half)); got != nil {
		t.Fatal("a second 60% compute share fit")
	}
}

func quantity(m map[resourceapi.QualifiedName]resource.Quantity, name resourceapi.QualifiedName) string {
	q := m[name]
	return q.String()
}
