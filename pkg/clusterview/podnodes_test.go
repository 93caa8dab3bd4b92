// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// TestPodNodesOnly is the two-node e2e cluster where `diagnose pod`
// counted, and suggested, the devices of a node the pod cannot be
// scheduled to: vm has eight H100s, gdra-node2 four A100s and a
// NoSchedule taint. A Pending pod that does not tolerate the taint must be
// told only of vm's devices; one that tolerates it, of both nodes'.
func TestPodNodesOnly(t *testing.T) {
	const a100 = "A100"
	for _, tc := range []struct {
		name      string
		selector  string
		taintH100 bool // every H100 carries a device taint: none is free
		tolerates bool
		onNode2   bool // the pod's nodeSelector names gdra-node2
	}{
		{name: "selector matches nothing", selector: "NVIDIA B300"},
		{name: "selector matches nothing, taint tolerated", selector: "NVIDIA B300", tolerates: true},
		{name: "no H100 free", selector: "NVIDIA H100 80GB HBM3", taintH100: true},
		{name: "no H100 free, taint tolerated", selector: "NVIDIA H100 80GB HBM3", taintH100: true, tolerates: true},
		{name: "taint tolerated, nodeSelector for gdra-node2", selector: "NVIDIA B300", tolerates: true, onNode2: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := twoNodes(t, tc.selector, tc.taintH100, tc.tolerates)
			perNode := map[string]int{}
			for _, s := range f.Snapshot.Slices {
				perNode[*s.Spec.NodeName] += len(s.Spec.Devices)
			}
			if tc.onNode2 {
				f.Snapshot.Pods[0].Spec.NodeSelector = map[string]string{corev1.LabelHostname: "gdra-node2"}
			}
			a := clusterview.AnalyzePod(&f.Snapshot, &f.Snapshot.Pods[0])
			v, _ := a.Verdict()
			r := a.Claims[0].Requests[0]
			want, suggests := perNode["vm"], false
			switch {
			case tc.onNode2:
				want, suggests = perNode["gdra-node2"], true
			case tc.tolerates:
				want, suggests = perNode["vm"]+perNode["gdra-node2"], true
			}
			if r.Candidates != want {
				t.Errorf("%d candidate devices, want %d (per node %v)", r.Candidates, want, perNode)
			}
			if got := strings.Contains(v.Verdict, a100); got != suggests {
				t.Errorf("verdict names the A100s: %v, want %v:\n%s", got, suggests, v.Verdict)
			}
			for _, s := range r.Selectors {
				if s.NearMiss != nil && strings.HasPrefix(s.NearMiss.Device, "gdra-node2/") && !tc.tolerates {
					t.Errorf("near miss %s is on a node the pod may not use", s.NearMiss.Device)
				}
			}
			for k, vals := range r.FreeInClass {
				if got := strings.Contains(strings.Join(vals, " "), a100); got != suggests {
					t.Errorf("free in class %s %v names the A100s: %v, want %v", k, vals, got, suggests)
				}
			}
		})
	}
}

// twoNodes is pending-selector-matches-nothing.yaml with a second,
// tainted node of four A100s, and the pod's request for product.
func twoNodes(t *testing.T, product string, taintH100, tolerates bool) *clusterviewtest.Fixture {
	f := loadFixture(t, "pending-selector-matches-nothing.yaml")
	f.Snapshot.Slices = nil
	taints := map[string]resourceapi.DeviceTaint{}
	if taintH100 {
		for _, d := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"} {
			taints[d] = resourceapi.DeviceTaint{Key: "gpu.nvidia.com/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}
		}
	}
	f.Simulated = []clusterviewtest.SimulatedNode{
		{Node: "vm", Profile: "h100x8", Taints: taints},
		{Node: "gdra-node2", Profile: "a100-80gbx4"},
	}
	f.BuildSlices(t)
	f.Snapshot.Nodes = append(f.Snapshot.Nodes, corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gdra-node2", Labels: map[string]string{corev1.LabelHostname: "gdra-node2"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
	})
	if tolerates {
		f.Snapshot.Pods[0].Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	}
	f.Snapshot.Claims[0].Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression = "device.attributes['gpu.nvidia.com'].productName == '" + product + "'"
	return f
}

// TestPodOnlyNodeWithItsGPUsTainted: the pod asks for an A100, and the
// only A100s are on gdra-node2, whose taint it does not tolerate. Its
// claim fits, only not on a node the pod may use, so the verdict must
// name the filter that keeps it off that node (the taint), not tell it
// to fix a selector that matches what it asked for.
func TestPodOnlyNodeWithItsGPUsTainted(t *testing.T) {
	f := twoNodes(t, "NVIDIA A100-SXM4-80GB", false, false)
	v, _ := clusterview.AnalyzePod(&f.Snapshot, &f.Snapshot.Pods[0]).Verdict()
	if !strings.Contains(v.Verdict, "node gdra-node2: TaintToleration: node(s) had untolerated taint(s) (nvidia.com/gpu=present:NoSchedule)") || strings.Contains(v.Verdict, "Fix the selector") {
		t.Errorf("verdict does not say that taint nvidia.com/gpu keeps the pod off gdra-node2, the node with its A100s:\n%s", v.Verdict)
	}
}

// TestPodNodesNarrowedByItsAllocatedClaim: the pod tolerates gdra-node2's
// taint and already has a claim allocated there (shared with a running
// pod), so the scheduler can put it on gdra-node2 only, as its
// DynamicResources filter says of every other node. A request that
// matches nothing is told of gdra-node2's devices alone; one for an H100,
// which only vm has, is told why vm is no option.
func TestPodNodesNarrowedByItsAllocatedClaim(t *testing.T) {
	for _, product := range []string{"NVIDIA B300", "NVIDIA H100 80GB HBM3"} {
		t.Run(product, func(t *testing.T) {
			f := twoNodes(t, product, false, true)
			pod := &f.Snapshot.Pods[0]
			shared := resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "shared", UID: "uid-shared"},
				Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}}}},
				Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
					Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "gdra-node2", Device: "gpu-0"}}},
					NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
						{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"gdra-node2"}}}}}},
				}},
			}
			f.Snapshot.Claims = append(f.Snapshot.Claims, shared)
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "shared", ResourceClaimName: &shared.Name})
			perNode := map[string]int{}
			for _, s := range f.Snapshot.Slices {
				perNode[*s.Spec.NodeName] += len(s.Spec.Devices)
			}
			a := clusterview.AnalyzePod(&f.Snapshot, pod)
			v, _ := a.Verdict()
			if product == "NVIDIA B300" {
				if r := a.Claims[0].Requests[0]; r.Candidates != perNode["gdra-node2"] {
					t.Errorf("%d candidate devices, want gdra-node2's %d (per node %v)", r.Candidates, perNode["gdra-node2"], perNode)
				}
				for k, vals := range a.Claims[0].Requests[0].FreeInClass {
					if strings.Contains(strings.Join(vals, " "), "H100") {
						t.Errorf("free in class %s offers vm's H100s %v", k, vals)
					}
				}
				return
			}
			if !strings.Contains(v.Verdict, "node vm: DynamicResources: resourceclaim not available on the node (claim shared is allocated elsewhere)") {
				t.Errorf("verdict does not say why vm, the node with the H100s, is no option:\n%s", v.Verdict)
			}
		})
	}
}
