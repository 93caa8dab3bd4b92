// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// TestParallelFilterMatchesSequential is the kube-scheduler's use of one
// allocator: for each pod, one Allocator over every node's slices, then an
// Allocate call per node from parallel goroutines. Several dynamic-MIG nodes,
// each filled to another level, must get from parallel calls exactly what a
// fresh allocator gives each node alone, for pod after pod over the same
// slice objects, and after a claim changes what one node holds. Under the
// race detector (make test, make allocator-patches) this is also what
// proves that state an allocator keeps across calls or pods is safe to
// share between the goroutines.
func TestParallelFilterMatchesSequential(t *testing.T) {
	inv := simulatedInventory(t, "h100x8")
	const nodes = 6
	var all allocator.Slices
	clusters := make([]*schedtest.Cluster, nodes)
	state := allocator.NewState()
	for i := range clusters {
		name := fmt.Sprintf("n%d", i)
		c := schedtest.New(t, driverName, name, resourceslices.Build(name, inv, resourceslices.Options{DynamicMIG: true}))
		// Node i holds i*9 1g.10gb claims: from empty to most of its 56 slots.
		for k := 0; k < i*9; k++ {
			r := c.Allocate(schedtest.Claim(fmt.Sprintf("fill-%d", k), migRequest("mig", "1g.10gb")))
			if r == nil {
				t.Fatalf("%s: fill claim %d did not fit", name, k)
			}
			schedtest.Hold(state, r)
		}
		clusters[i] = c
		all = append(all, c.Converted()...)
	}
	lister := clusters[0]
	celCache := schedtest.NewCELCache()
	claims := []*resourceapi.ResourceClaim{
		schedtest.Claim("mig", migRequest("mig", "1g.10gb")),
		schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1)),
		schedtest.Claim("large", migRequest("mig", "3g.40gb")),
	}
	allocate := func(alloc allocator.Allocator, node int, claim *resourceapi.ResourceClaim) []string {
		results, err := alloc.Allocate(context.Background(), clusters[node].Node, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			t.Errorf("n%d, %s: %v", node, claim.Name, err)
			return nil
		}
		if len(results) == 0 {
			return []string{"does not fit"}
		}
		return schedtest.Devices(&results[0])
	}
	newAllocator := func() allocator.Allocator {
		alloc, err := allocator.New(context.Background(), lister, state, all, celCache)
		if err != nil {
			t.Fatal(err)
		}
		return alloc
	}
	// check returns what each claim gets on each node.
	check := func(round string) map[string][][]string {
		t.Helper()
		answers := map[string][][]string{}
		for _, claim := range claims {
			want := make([][]string, nodes)
			for node := range nodes {
				want[node] = allocate(newAllocator(), node, claim)
			}
			answers[claim.Name] = want
			// Two pods in a row, each with one allocator shared by all nodes.
			for pod := range 2 {
				alloc := newAllocator()
				got := make([][]string, nodes)
				var wg sync.WaitGroup
				for node := range nodes {
					wg.Go(func() { got[node] = allocate(alloc, node, claim) })
				}
				wg.Wait()
				for node := range nodes {
					if !slices.Equal(got[node], want[node]) {
						t.Errorf("%s, pod %d, %s on n%d: parallel got %v, alone %v", round, pod, claim.Name, node, got[node], want[node])
					}
				}
			}
		}
		return answers
	}
	before := check("filled")
	// A claim bound on n2 changes what that node has left; the others stay.
	r := clusters[2].Allocate(schedtest.Claim("bound", migRequest("mig", "3g.40gb")))
	if r == nil {
		t.Fatal("n2: the 3g.40gb claim did not fit")
	}
	schedtest.Hold(state, r)
	after := check("after a 3g.40gb on n2")
	if slices.Equal(after["large"][2], before["large"][2]) {
		t.Errorf("n2 offers %v for a 3g.40gb after one was bound there, as before", after["large"][2])
	}
	if !slices.Equal(after["large"][3], before["large"][3]) {
		t.Errorf("n3 offers %v for a 3g.40gb after a claim was bound on n2, %v before", after["large"][3], before["large"][3])
	}
}
