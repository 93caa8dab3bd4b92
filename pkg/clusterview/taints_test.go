// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview_test

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

const unhealthy = "gpu.nvidia.com/unhealthy=xid-79:NoSchedule"

// TestTaintBlocked starts from the fixture where the only GPU is tainted
// and changes one thing at a time: the verdict "taints alone block the pod"
// must hold only when removing the taints would let the pod fit.
func TestTaintBlocked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(f *clusterviewtest.Fixture)
		want   []string // pool/device: taints of the one blocked request
	}{
		{name: "only GPU tainted", want: []string{"vm/gpu-0: [" + unhealthy + "]"}},
		{name: "shared GPU tainted", change: func(f *clusterviewtest.Fixture) {
			shared := loadFixture(t, "pending-tainted-shared-gpu.yaml")
			f.Snapshot.Slices, f.Snapshot.Claims = shared.Snapshot.Slices, shared.Snapshot.Claims
		}, want: []string{"vm/gpu-0: [gpu.nvidia.com/unhealthy=ecc-dbe:NoSchedule]"}},
		{name: "request tolerates the taint", change: func(f *clusterviewtest.Fixture) {
			f.Snapshot.Claims[0].Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{
				{Key: "gpu.nvidia.com/unhealthy", Operator: resourceapi.DeviceTolerationOpExists}}
		}},
		{name: "no taint", change: func(f *clusterviewtest.Fixture) { untaint(f) }},
		{name: "two GPUs wanted, one exists", change: func(f *clusterviewtest.Fixture) {
			// Without the taint it would still not fit: something else
			// blocks the pod, so the taint is not the explanation.
			f.Snapshot.Claims[0].Spec.Devices.Requests[0].Exactly.Count = 2
		}},
		{name: "another driver's devices", change: func(f *clusterviewtest.Fixture) {
			// The slices and classes are the other driver's as far as
			// the diagnosis of this one goes.
			f.Snapshot.DriverName = "other.example.com"
		}},
		{name: "pod already on a node", change: func(f *clusterviewtest.Fixture) { f.Snapshot.Pods[0].Spec.NodeName = "vm" }},
		{name: "GPU allocated to another claim, and tainted", change: func(f *clusterviewtest.Fixture) {
			f.Snapshot.Claims = append(f.Snapshot.Claims, allocatedClaim("holder", "gpu-0"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := loadFixture(t, "pending-tainted-device.yaml")
			if tc.change != nil {
				tc.change(f)
			}
			r, blocks := clusterview.TaintBlocked(&f.Snapshot, "ns", "p")
			var got []string
			for _, b := range blocks {
				if b.Claim != "ns/c" || b.PodClaim != "gpu" || b.Request != "gpu" {
					t.Errorf("block %+v, want claim ns/c, pod claim gpu, request gpu", b)
				}
				for _, d := range b.Devices {
					got = append(got, fmt.Sprintf("%s/%s: %v", d.Node, d.Device, d.Taints))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("tainted devices %v, want %v; verdict: %s", got, tc.want, r.Verdict)
			}
		})
	}
}

// The snapshot must be left as it was: the explainer's is an informer's
// cache.
func TestTaintBlockedLeavesTheSnapshot(t *testing.T) {
	f := loadFixture(t, "pending-tainted-device.yaml")
	if _, blocks := clusterview.TaintBlocked(&f.Snapshot, "ns", "p"); len(blocks) != 1 {
		t.Fatalf("blocks %+v, want one", blocks)
	}
	n := 0
	for _, s := range f.Snapshot.Slices {
		for _, d := range s.Spec.Devices {
			n += len(d.Taints)
		}
	}
	if n != 1 {
		t.Errorf("%d taints left in the snapshot, want the 1 it had", n)
	}
}

func untaint(f *clusterviewtest.Fixture) {
	for i := range f.Snapshot.Slices {
		for j := range f.Snapshot.Slices[i].Spec.Devices {
			f.Snapshot.Slices[i].Spec.Devices[j].Taints = nil
		}
	}
}

func allocatedClaim(name, device string) resourceapi.ResourceClaim {
	c := resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "vm", Device: device}}}}
	return c
}
