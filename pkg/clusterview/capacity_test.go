// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview_test

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

func capacityFleet(t testing.TB, nodes ...clusterviewtest.SimulatedNode) *clusterview.Snapshot {
	t.Helper()
	f := &clusterviewtest.Fixture{Simulated: nodes}
	f.Snapshot.DriverName = "gpu.nvidia.com"
	for _, dc := range schedtest.ShippedDeviceClasses(t) {
		f.Snapshot.DeviceClasses = append(f.Snapshot.DeviceClasses, *dc)
	}
	f.BuildSlices(t)
	return &f.Snapshot
}

// allocateOn allocates a claim on one node of the snapshot with the
// scheduler's allocator, as the scheduler would, and records it. The
// allocator starts from the node's free devices: one claim a node.
func allocateOn(t testing.TB, s *clusterview.Snapshot, node string, claim *resourceapi.ResourceClaim) {
	t.Helper()
	var slices []*resourceapi.ResourceSlice
	for i := range s.Slices {
		if *s.Slices[i].Spec.NodeName == node {
			slices = append(slices, &s.Slices[i])
		}
	}
	r := schedtest.NewFromSlices(t, node, slices).Allocate(claim)
	if r == nil {
		t.Fatalf("claim %s does not fit on %s", claim.Name, node)
	}
	claim.Status.Allocation = r
	s.Claims = append(s.Claims, *claim)
}

func counts(caps []clusterview.NodeCapacity) map[string]int {
	m := map[string]int{}
	for _, c := range caps {
		m[c.Node] = c.Count
	}
	return m
}

// TestCapacity counts with the real allocator: 7 1g.10gb MIG devices per
// H100, fewer where a GPU is taken whole, none on a node without dynamic
// MIG; 20Gi memory fractions four to an 80GB GPU.
func TestCapacity(t *testing.T) {
	s := capacityFleet(t,
		clusterviewtest.SimulatedNode{Node: "mig-a", Profile: "h100x2", DynamicMIG: true},
		clusterviewtest.SimulatedNode{Node: "mig-b", Profile: "h100x2", DynamicMIG: true},
		clusterviewtest.SimulatedNode{Node: "whole", Profile: "h100x2"},
		clusterviewtest.SimulatedNode{Node: "frac", Profile: "h100x2", FractionalGPUs: []int{0, 1}},
	)
	allocateOn(t, s, "mig-b", schedtest.Claim("holder", schedtest.Request("gpu", "gpu.nvidia.com", 1)))

	mig := schedtest.Claim("probe", schedtest.Request("r", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))
	caps, err := clusterview.Capacity(context.Background(), s, mig, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"mig-a": 14, "mig-b": 7, "whole": 0, "frac": 0}
	if got := counts(caps); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("1g.10gb capacity %v, want %v", got, want)
	}

	frac := schedtest.Claim("probe", schedtest.WithCapacity(schedtest.Request("r", "gpu.nvidia.com", 1), map[resourceapi.QualifiedName]string{"memory": "20Gi"}))
	caps, err = clusterview.Capacity(context.Background(), s, frac, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// frac: four 20Gi shares of each simulated H100's memory (a fifth
	// does not fit); elsewhere a request with a memory size takes a whole GPU:
	// mig-a's two, mig-b's one left, whole's two.
	if got := counts(caps); got["frac"] != 2*4 || got["mig-a"] != 2 || got["mig-b"] != 1 || got["whole"] != 2 {
		t.Errorf("20Gi capacity %v", got)
	}

	caps, err = clusterview.Capacity(context.Background(), s, mig, 5)
	if err != nil {
		t.Fatal(err)
	}
	if caps[0].Node != "frac" || caps[1].Node != "mig-a" || caps[1].Count != 5 || !caps[1].AtLimit || caps[3].AtLimit {
		t.Errorf("limit 5: %+v, want mig-a stopped at 5 and marked, whole not", caps)
	}

	// A selector that reads more of the device than named attributes
	// (size of the whole map) is evaluated on every device, on the
	// slices' conversion, and counts the same.
	whole := schedtest.Claim("probe", schedtest.Request("r", "mig.nvidia.com", 1,
		"device.attributes['gpu.nvidia.com'].profile == '1g.10gb' && size(device.attributes) > 0"))
	caps, err = clusterview.Capacity(context.Background(), s, whole, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts(caps); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("1g.10gb capacity, selector read whole: %v, want %v", got, want)
	}

	bad := schedtest.Claim("probe", schedtest.Request("r", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile.nope()"))
	if _, err := clusterview.Capacity(context.Background(), s, bad, 10); err == nil {
		t.Error("a selector that does not compile gave no error")
	}
}

// BenchmarkCapacity is `gpudra capacity --mig-profile 1g.10gb` over a fleet
// of eight-H100 dynamic-MIG nodes (56 MIG devices a node to count): idle
// nodes, which are alike and counted once, and the worst case, every node
// different (memoization off).
func BenchmarkCapacity(b *testing.B) {
	for _, alike := range []bool{true, false} {
		for _, n := range []int{10, 100, 500} {
			b.Run(fmt.Sprintf("alike=%v/nodes=%d", alike, n), func(b *testing.B) {
				var nodes []clusterviewtest.SimulatedNode
				for i := range n {
					nodes = append(nodes, clusterviewtest.SimulatedNode{Node: fmt.Sprintf("node-%03d", i), Profile: "h100x8", DynamicMIG: true})
				}
				s := capacityFleet(b, nodes...)
				mig := schedtest.Claim("probe", schedtest.Request("r", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))
				clusterview.SetMemoizeForTest(alike)
				defer clusterview.SetMemoizeForTest(true)
				b.ReportAllocs()
				for b.Loop() {
					caps, err := clusterview.Capacity(context.Background(), s, mig, 10000)
					if err != nil || len(caps) != n || caps[0].Count != 56 || caps[n-1].Count != 56 {
						b.Fatalf("%v %+v", err, caps[:1])
					}
				}
			})
		}
	}
}
