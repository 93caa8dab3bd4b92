// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview_test

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// BenchmarkTaintBlocked is what the pending explainer spends on one
// Unschedulable pod: the worst case, where the pod's request (GPU index 1)
// matches a tainted GPU on every node of the cluster, so both allocator
// runs (with the taints, then without) look at every node. Nodes are eight
// simulated H100s each, published with dynamic MIG (the most devices a
// node of this driver has). The explainer narrows its snapshots to the
// nodes with tainted devices (pendingexplainer's scope.go) because of what
// this costs at 100 nodes.
func BenchmarkTaintBlocked(b *testing.B) {
	for _, nodes := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			f := loadFixture(b, "pending-tainted-device.yaml")
			f.Simulated = nil
			f.Snapshot.Slices = nil
			taint := resourceapi.DeviceTaint{Key: "gpu.nvidia.com/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}
			for i := range nodes {
				f.Simulated = append(f.Simulated, clusterviewtest.SimulatedNode{Node: fmt.Sprintf("node-%03d", i), Profile: "h100x8", DynamicMIG: true,
					Taints: map[string]resourceapi.DeviceTaint{"gpu-1": taint}})
			}
			f.BuildSlices(b)
			f.Snapshot.Claims[0].Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{
				{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].index == 1"}}}
			devices := 0
			for _, s := range f.Snapshot.Slices {
				devices += len(s.Spec.Devices)
			}
			if _, blocks := clusterview.TaintBlocked(&f.Snapshot, "ns", "p"); len(blocks) != 1 || len(blocks[0].Devices) != nodes {
				b.Fatalf("blocks %+v, want one request blocked by %d tainted GPUs", blocks, nodes)
			}
			b.ReportAllocs()
			for b.Loop() {
				clusterview.TaintBlocked(&f.Snapshot, "ns", "p")
			}
			b.ReportMetric(float64(devices), "devices")
		})
	}
}
