// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package podfit

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, mod func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}}}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("3")}
	if mod != nil {
		mod(n)
	}
	return n
}

func podRequesting(cpu string, mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}
	if mod != nil {
		mod(p)
	}
	return p
}

// TestStatic: the first filter that rejects, in the scheduler's order; a
// tolerated taint, a PreferNoSchedule taint and a matching selector pass.
func TestStatic(t *testing.T) {
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	tainted := func(effect corev1.TaintEffect) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: effect}}
		}
	}
	both := func(n *corev1.Node) { cordoned(n); tainted(corev1.TaintEffectNoSchedule)(n) }
	tolerateAll := func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }
	zoneB := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }
	zoneA := func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a"} }
	for _, c := range []struct {
		name   string
		node   *corev1.Node
		pod    *corev1.Pod
		filter string
	}{
		{"cordoned and tainted", node("n", both), podRequesting("1", nil), FilterNodeUnschedulable},
		{"cordoned, tolerates everything", node("n", both), podRequesting("1", tolerateAll), ""},
		{"NoSchedule", node("n", tainted(corev1.TaintEffectNoSchedule)), podRequesting("1", nil), FilterTaintToleration},
		{"NoExecute", node("n", tainted(corev1.TaintEffectNoExecute)), podRequesting("1", nil), FilterTaintToleration},
		{"PreferNoSchedule", node("n", tainted(corev1.TaintEffectPreferNoSchedule)), podRequesting("1", nil), ""},
		{"selector elsewhere", node("n", nil), podRequesting("1", zoneB), FilterNodeAffinity},
		{"selector here", node("n", nil), podRequesting("1", zoneA), ""},
	} {
		rej, err := Static(c.pod, c.node)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := rej.String(); (c.filter == "") != (rej == nil) || (rej != nil && rej.Filter != c.filter) {
			t.Errorf("%s: %q, want filter %q", c.name, got, c.filter)
		}
	}
	rej, _ := Static(podRequesting("1", nil), node("n", tainted(corev1.TaintEffectNoSchedule)))
	if want := "TaintToleration: node(s) had untolerated taint(s) (dedicated=infra:NoSchedule)"; rej.String() != want {
		t.Errorf("%q, want %q", rej, want)
	}
}

// TestFitCount: the pods bound to a node take its room, ended pods do
// not; a resource DynamicResources handles is not NodeResourcesFit's; the
// smallest count wins and its reasons are the scheduler's.
func TestFitCount(t *testing.T) {
	n := node("n", nil)
	bound := func(name, node, cpu string, phase corev1.PodPhase) corev1.Pod {
		p := podRequesting(cpu, nil)
		p.Name, p.Spec.NodeName, p.Status.Phase = name, node, phase
		return *p
	}
	pods := BoundByNode([]corev1.Pod{
		bound("busy", "n", "5", corev1.PodRunning), bound("done", "n", "4", corev1.PodSucceeded),
		bound("there", "m", "8", corev1.PodRunning), bound("pending", "", "8", corev1.PodPending),
	})
	if got := len(pods["n"]) + len(pods["m"]) + len(pods[""]); got != 2 {
		t.Fatalf("BoundByNode kept %d pods, want busy and there", got)
	}
	room := RoomOn(n, pods["n"])
	gpu := corev1.ResourceName("nvidia.com/gpu")
	dra := func(name corev1.ResourceName) bool { return name == gpu }
	for _, c := range []struct {
		cpu   string
		extra corev1.ResourceList
		limit int
		count int
		why   []string
	}{
		{"1", nil, 10, 2, []string{"Too many pods"}}, // 3 slots, busy holds one
		{"2", nil, 10, 1, []string{"Insufficient cpu"}},
		{"3", nil, 1, 1, nil}, // at the limit: no reason
		{"4", nil, 10, 0, []string{"Insufficient cpu"}},
		{"1500m", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}, 10, 2, []string{"Too many pods", "Insufficient cpu", "Insufficient memory"}},
		{"1", corev1.ResourceList{gpu: resource.MustParse("9")}, 10, 2, []string{"Too many pods"}},
	} {
		p := podRequesting(c.cpu, nil)
		for name, q := range c.extra {
			p.Spec.Containers[0].Resources.Requests[name] = q
		}
		count, why := FitCount(Requests(p), room, dra, c.limit)
		if count != c.count || !slices.Equal(why, c.why) {
			t.Errorf("cpu %s %v: %d %q, want %d %q", c.cpu, c.extra, count, why, c.count, c.why)
		}
	}
	if r := ResourcesRejection([]string{"Insufficient cpu", "Insufficient memory"}); r.String() != "NodeResourcesFit: Insufficient cpu, Insufficient memory" {
		t.Errorf("ResourcesRejection: %q", r)
	}
}
