// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/podfit"
)

// kubeNode is a Node with room for cpu, memory and pods.
func kubeNode(name, cpu, memory, pods string, labels map[string]string) corev1.Node {
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse(pods)}}}
}

// boundPod is a pod the scheduler placed on node, requesting cpu and memory.
func boundPod(name, node, cpu, memory string) corev1.Pod {
	p := podRequesting(name, cpu, memory)
	p.Spec.NodeName = node
	p.Status.Phase = corev1.PodRunning
	return p
}

func podRequesting(name, cpu, memory string) corev1.Pod {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		req[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}
}

func counts(t *testing.T, rep *PodCapacityReport) map[string]NodePodCapacity {
	t.Helper()
	m := map[string]NodePodCapacity{}
	for _, n := range rep.Nodes {
		m[n.Node] = n
	}
	return m
}

// want checks a node's count and the filter (and a part of the reason)
// that stops the next copy.
func want(t *testing.T, got map[string]NodePodCapacity, node string, count int, filter, reason string) {
	t.Helper()
	n, ok := got[node]
	if !ok {
		t.Errorf("node %s: not counted", node)
		return
	}
	if n.Count != count {
		t.Errorf("node %s: %d copies, want %d (%s)", node, n.Count, count, n.StoppedBy)
	}
	switch {
	case filter == "" && n.StoppedBy != nil:
		t.Errorf("node %s: stopped by %s, want the limit", node, n.StoppedBy)
	case filter != "" && (n.StoppedBy == nil || n.StoppedBy.Filter != filter || !strings.Contains(n.StoppedBy.Reason, reason)):
		t.Errorf("node %s: stopped by %v, want %s with %q", node, n.StoppedBy, filter, reason)
	}
}

// TestPodCapacityFilters: each of the scheduler's node filters stops the
// node it should, with the scheduler's words, for a pod without claims.
func TestPodCapacityFilters(t *testing.T) {
	s := &clusterview.Snapshot{DriverName: driver}
	cordoned := kubeNode("cordoned", "8", "8Gi", "110", nil)
	cordoned.Spec.Unschedulable = true
	tainted := kubeNode("tainted", "8", "8Gi", "110", nil)
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	s.Nodes = []corev1.Node{
		cordoned, tainted,
		kubeNode("elsewhere", "8", "8Gi", "110", map[string]string{"zone": "b"}),
		kubeNode("cpu", "4", "8Gi", "110", map[string]string{"zone": "a"}),    // 1.5 of 4 CPUs taken: 2 more of 1
		kubeNode("memory", "8", "3Gi", "110", map[string]string{"zone": "a"}), // 1 GiB of 3 taken: 2 more of 1 GiB
		kubeNode("slots", "8", "8Gi", "2", map[string]string{"zone": "a"}),    // 2 pod slots, both taken
		kubeNode("both", "3", "3Gi", "110", map[string]string{"zone": "a"}),   // 3 of CPU and of memory: both say so
	}
	s.Pods = []corev1.Pod{
		boundPod("a", "cpu", "1500m", ""),
		boundPod("b", "memory", "", "1Gi"),
		boundPod("c", "slots", "", ""), boundPod("d", "slots", "", ""),
		// Ended pods take nothing.
		func() corev1.Pod { p := boundPod("e", "cpu", "2", ""); p.Status.Phase = corev1.PodSucceeded; return p }(),
	}
	pod := podRequesting("web", "1", "1Gi")
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"b"}}}}}}}}
	shape := &PodShape{From: "deployment ml/web", Pod: pod}
	rep, err := PodCapacity(context.Background(), s, shape, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := counts(t, rep)
	want(t, got, "cordoned", 0, podfit.FilterNodeUnschedulable, "node(s) were unschedulable")
	want(t, got, "tainted", 0, podfit.FilterTaintToleration, "untolerated taint(s) (dedicated=infra:NoSchedule)")
	want(t, got, "elsewhere", 0, podfit.FilterNodeAffinity, "node(s) didn't match Pod's node affinity/selector")
	want(t, got, "cpu", 2, podfit.FilterNodeResourcesFit, "Insufficient cpu")
	want(t, got, "memory", 2, podfit.FilterNodeResourcesFit, "Insufficient memory")
	want(t, got, "slots", 0, podfit.FilterNodeResourcesFit, "Too many pods")
	want(t, got, "both", 3, podfit.FilterNodeResourcesFit, "Insufficient cpu, Insufficient memory")
	if rep.Total != 7 {
		t.Errorf("total %d, want 7", rep.Total)
	}

	// Tolerating the taint and the cordon opens both nodes; a nodeSelector
	// is node affinity too.
	shape.Pod.Spec.Affinity = nil
	shape.Pod.Spec.NodeSelector = map[string]string{"zone": "a"}
	shape.Pod.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	s.Nodes[0].Labels["zone"], s.Nodes[1].Labels["zone"] = "a", "a"
	rep, err = PodCapacity(context.Background(), s, shape, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got = counts(t, rep)
	want(t, got, "cordoned", 8, podfit.FilterNodeResourcesFit, "Insufficient cpu, Insufficient memory")
	want(t, got, "tainted", 8, podfit.FilterNodeResourcesFit, "Insufficient cpu, Insufficient memory")
	want(t, got, "elsewhere", 0, podfit.FilterNodeAffinity, "node affinity/selector")

	// A pod requesting nothing is stopped by pod slots, or the limit.
	rep, err = PodCapacity(context.Background(), s, &PodShape{From: "pod ml/idle", Pod: podRequesting("idle", "", "")}, "slots", 5)
	if err != nil || len(rep.Nodes) != 1 {
		t.Fatalf("--node slots: %+v %v", rep, err)
	}
	want(t, counts(t, rep), "slots", 0, podfit.FilterNodeResourcesFit, "Too many pods")
	rep, err = PodCapacity(context.Background(), s, &PodShape{From: "pod ml/idle", Pod: podRequesting("idle", "", "")}, "cpu", 5)
	if err != nil || !rep.AtLimit {
		t.Fatalf("--node cpu: %+v %v, want the limit", rep, err)
	}
	want(t, counts(t, rep), "cpu", 5, "", "")
}

// gpuFleet is demoFleet with Node objects: n1 (four H100s; three free
// 1g.10gb placements, GPU 3 offered as memory fractions with 30Gi of 80Gi
// shared out) and n2 (two A100s, one tainted unhealthy), and a third node
// without GPUs.
func gpuFleet(t *testing.T) *clusterview.Snapshot {
	s := demoFleet(t)
	s.Nodes = []corev1.Node{kubeNode("n1", "64", "512Gi", "110", nil), kubeNode("n2", "64", "512Gi", "110", nil), kubeNode("cpu-only", "64", "512Gi", "110", nil)}
	template := func(name string, c *resourceapi.ResourceClaim) resourceapi.ResourceClaimTemplate {
		return resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: c.Spec}}
	}
	s.ClaimTemplates = []resourceapi.ResourceClaimTemplate{
		template("mig-1g", schedtest.Claim("x", schedtest.Request("mig", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))),
		template("frac-10gi", schedtest.Claim("x", schedtest.WithCapacity(schedtest.Request("gpu", "gpu.nvidia.com", 1, "device.allowMultipleAllocations"),
			map[resourceapi.QualifiedName]string{deviceattr.CapMemory: "10Gi"}))),
	}
	return s
}

func withTemplate(pod corev1.Pod, templates ...string) corev1.Pod {
	for _, tmpl := range templates {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: tmpl, ResourceClaimTemplateName: ptr.To(tmpl)})
	}
	return pod
}

// TestPodCapacityMIG counts a pod with a 1g.10gb claim from a template:
// n1's three free placements, then DynamicResources; n2 and the node
// without GPUs take none. With CPU for two copies only, NodeResourcesFit
// stops n1 first.
func TestPodCapacityMIG(t *testing.T) {
	s := gpuFleet(t)
	shape := &PodShape{From: "deployment ml/infer", Pod: withTemplate(podRequesting("infer", "1", "1Gi"), "mig-1g")}
	rep, err := PodCapacity(context.Background(), s, shape, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := counts(t, rep)
	want(t, got, "n1", 3, podfit.FilterDynamicResources, "cannot allocate all claims")
	want(t, got, "n2", 0, podfit.FilterDynamicResources, "cannot allocate all claims")
	want(t, got, "cpu-only", 0, podfit.FilterDynamicResources, "cannot allocate all claims")
	if rep.Total != 3 || len(rep.Claims) != 1 {
		t.Errorf("total %d claims %v, want 3 and one claim per copy", rep.Total, rep.Claims)
	}
	s.Pods = []corev1.Pod{boundPod("busy", "n1", "62", "")}
	rep, err = PodCapacity(context.Background(), s, shape, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	want(t, counts(t, rep), "n1", 2, podfit.FilterNodeResourcesFit, "Insufficient cpu")

	// Two claims per copy: each copy takes two placements, so one copy.
	shape.Pod = withTemplate(podRequesting("pair", "1", ""), "mig-1g", "mig-1g")
	shape.Pod.Spec.ResourceClaims[1].Name = "second"
	s.Pods = nil
	rep, err = PodCapacity(context.Background(), s, shape, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	want(t, counts(t, rep), "n1", 1, podfit.FilterDynamicResources, "cannot allocate all claims")
}

// TestPodCapacityFraction counts a pod with a 10Gi memory fraction:
// n1's GPU 3 has 50Gi of 80Gi left, five more shares.
func TestPodCapacityFraction(t *testing.T) {
	s := gpuFleet(t)
	shape := &PodShape{From: "deployment ml/small", Pod: withTemplate(podRequesting("small", "100m", ""), "frac-10gi")}
	rep, err := PodCapacity(context.Background(), s, shape, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := counts(t, rep)
	want(t, got, "n1", 5, podfit.FilterDynamicResources, "cannot allocate all claims")
	want(t, got, "n2", 0, podfit.FilterDynamicResources, "cannot allocate all claims")
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"NODE      FITS  STOPPED BY\n", "n1        5     DynamicResources: cannot allocate all claims\n",
		"TOTAL: 5 more pods of deployment ml/small fit now (3 nodes counted)\n"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table:\n%s\nlacks %q", out.String(), w)
		}
	}
}

// TestPodCapacityErrors: a missing template, a node that does not exist.
func TestPodCapacityErrors(t *testing.T) {
	s := gpuFleet(t)
	_, err := PodCapacity(context.Background(), s, &PodShape{From: "deployment ml/x", Pod: withTemplate(podRequesting("x", "", ""), "nope")}, "", 10)
	if err == nil || !strings.Contains(err.Error(), "ResourceClaimTemplate ml/nope does not exist") {
		t.Errorf("missing template: %v", err)
	}
	_, err = PodCapacity(context.Background(), s, &PodShape{From: "pod ml/x", Pod: podRequesting("x", "", "")}, "n9", 10)
	if err == nil || !strings.Contains(err.Error(), "--node n9") {
		t.Errorf("unknown node: %v", err)
	}
}

// TestReadShapeFile takes the pod template of a Deployment manifest, in
// the namespace given where the manifest has none, and refuses a file of
// several objects.
func TestReadShapeFile(t *testing.T) {
	dir := t.TempDir()
	deploy := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {zone: a}
      containers: [{name: c, image: x, resources: {requests: {cpu: 500m}}}]
`
	path := filepath.Join(dir, "d.yaml")
	if err := os.WriteFile(path, []byte(deploy), 0o600); err != nil {
		t.Fatal(err)
	}
	shape, err := ReadShapeFile(path, "ml")
	if err != nil {
		t.Fatal(err)
	}
	if shape.From != "deployment ml/web (file "+path+")" || shape.Pod.Namespace != "ml" || shape.Pod.Spec.NodeSelector["zone"] != "a" ||
		shape.Pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 500 {
		t.Errorf("shape %s: %+v", shape.From, shape.Pod)
	}
	if err := os.WriteFile(path, []byte(deploy+"---\n"+deploy), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadShapeFile(path, "ml"); err == nil || !strings.Contains(err.Error(), "2 objects") {
		t.Errorf("two objects: %v", err)
	}
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadShapeFile(path, "ml"); err == nil || !strings.Contains(err.Error(), "no pod template") {
		t.Errorf("a ConfigMap: %v", err)
	}
}
