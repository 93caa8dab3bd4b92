// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
)

const (
	capNS    = "gpu-capacity"
	capTaint = "gpu-dra-e2e/capacity"
	// capFits is N: the CPU request leaves room for exactly this many
	// more pods on the real node.
	capFits = 2
)

const capTemplates = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-1g, namespace: gpu-capacity}
spec: {spec: {devices: {requests: [{name: mig, exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: frac-10gi, namespace: gpu-capacity}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, capacity: {requests: {memory: 10Gi}}, selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]}}]}}}
`

const capWarmUp = `
apiVersion: v1
kind: Pod
metadata: {name: frac-warm-up, namespace: gpu-capacity}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: frac-10gi}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {requests: {cpu: 10m}, claims: [{name: gpu}]}}]
`

// capacityReport is the part of `kubectl gpu capacity --for -o json` the
// test reads.
type capacityReport struct {
	Nodes []struct {
		Node      string `json:"node"`
		Count     int    `json:"count"`
		StoppedBy *struct {
			Filter string `json:"filter"`
			Reason string `json:"reason"`
		} `json:"stoppedBy"`
	} `json:"nodes"`
	Total int `json:"total"`
}

// TestCapacityForDeployment: with two kubelet-less nodes carrying copies
// of the real node's slices, one cordoned and one tainted NoSchedule, and
// a CPU request that leaves room for exactly capFits more pods on the real
// node, `kubectl gpu capacity --for deployment/X` says capFits, names the
// filter that stops each node, and scaling the Deployment up by capFits
// runs every new pod while one more stays Pending for the reason named.
// For a pod without claims, one with a 1g.10gb MIG device and one with a
// 10Gi memory fraction.
func TestCapacityForDeployment(t *testing.T) {
	ctx := context.Background()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-gpu"), "./cmd/kubectl-gpu")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-gpu: %v\n%s", err, out)
	}
	testNamespace(t, capNS)
	applyYAML(t, capTemplates)
	real := runningPluginPod(t).Spec.NodeName
	cordoned, tainted := "gpu-capacity-cordoned", "gpu-capacity-tainted"
	fakeNode(t, real, cordoned, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	fakeNode(t, real, tainted, func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: capTaint, Value: "reserved", Effect: corev1.TaintEffectNoSchedule}}
	})

	for _, c := range []struct{ name, template string }{{"plain", ""}, {"mig", "mig-1g"}, {"fraction", "frac-10gi"}} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "fraction" {
				// A GPU's first memory share starts the driver's MPS
				// control daemon, a pod of its own that requests a CPU
				// (capacity does not count it): one share runs first.
				applyYAML(t, capWarmUp)
				waitRunningIn(t, capNS, "frac-warm-up")
				defer func() { _ = client.CoreV1().Pods(capNS).Delete(ctx, "frac-warm-up", metav1.DeleteOptions{}) }()
			}
			cpu := cpuForFits(t, real, capFits)
			deploy := capDeployment("cap-"+c.name, cpu, c.template)
			if _, err := client.AppsV1().Deployments(capNS).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = client.AppsV1().Deployments(capNS).Delete(ctx, deploy.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
				waitFor(t, "the pods of "+deploy.Name+" gone", 60*time.Second, func() (bool, string) {
					pods := capPods(t, deploy.Name)
					return len(pods) == 0, fmt.Sprintf("%d pods", len(pods))
				})
			}()
			t.Logf("$ kubectl gpu capacity --for deployment/%s -n %s   # %s CPU per pod\n%s", deploy.Name, capNS, cpu.String(),
				kubectlGPU(t, bin, "capacity", "--for", "deployment/"+deploy.Name, "-n", capNS))
			var rep capacityReport
			if err := json.Unmarshal([]byte(kubectlGPU(t, bin, "capacity", "--for", "deployment/"+deploy.Name, "-n", capNS, "-o", "json")), &rep); err != nil {
				t.Fatal(err)
			}
			reasons := map[string]string{}
			for _, n := range rep.Nodes {
				if n.StoppedBy != nil {
					reasons[n.Node] = n.StoppedBy.Filter + ": " + n.StoppedBy.Reason
				}
				switch n.Node {
				case real:
					if n.Count != capFits || n.StoppedBy == nil || n.StoppedBy.Filter != "NodeResourcesFit" || n.StoppedBy.Reason != "Insufficient cpu" {
						t.Errorf("real node %s: %d more, stopped by %s; want %d, NodeResourcesFit: Insufficient cpu", real, n.Count, reasons[real], capFits)
					}
				case cordoned:
					if n.Count != 0 || reasons[cordoned] != "NodeUnschedulable: node(s) were unschedulable" {
						t.Errorf("cordoned node: %d, %s", n.Count, reasons[cordoned])
					}
				case tainted:
					if n.Count != 0 || !strings.HasPrefix(reasons[tainted], "TaintToleration: node(s) had untolerated taint") {
						t.Errorf("tainted node: %d, %s", n.Count, reasons[tainted])
					}
				}
			}
			if rep.Total != capFits {
				t.Errorf("total %d, want %d", rep.Total, capFits)
			}

			scale(t, deploy.Name, capFits)
			waitFor(t, fmt.Sprintf("%d running pods of %s", capFits, deploy.Name), 90*time.Second, func() (bool, string) {
				running, states := 0, []string{}
				for _, p := range capPods(t, deploy.Name) {
					if p.Status.Phase == corev1.PodRunning {
						running++
					}
					st := string(p.Status.Phase)
					for _, c := range p.Status.Conditions {
						if c.Status != corev1.ConditionTrue && c.Message != "" {
							st += " " + string(c.Type) + ": " + c.Message
						}
					}
					states = append(states, p.Name+" "+st+" events: "+podEvents(t, p.Name))
				}
				return running == capFits, fmt.Sprintf("%d running: %s", running, strings.Join(states, "; "))
			})
			scale(t, deploy.Name, capFits+1)
			// The one more is Pending, and the scheduler's reasons are the
			// ones capacity gave, node by node.
			waitFor(t, "the pod beyond capacity Pending with FailedScheduling", 60*time.Second, func() (bool, string) {
				for _, p := range capPods(t, deploy.Name) {
					if p.Spec.NodeName != "" {
						continue
					}
					msg := schedulingMessage(t, p.Name)
					for _, node := range []string{real, cordoned, tainted} {
						_, reason, _ := strings.Cut(reasons[node], ": ")
						if reason = strings.SplitN(reason, " (", 2)[0]; !strings.Contains(msg, reason) {
							return false, fmt.Sprintf("pod %s: %q lacks %q (node %s)", p.Name, msg, reason, node)
						}
					}
					t.Logf("pod %s Pending: %s", p.Name, msg)
					return true, ""
				}
				return false, "no unscheduled pod"
			})
		})
	}
}

// fakeNode creates a kubelet-less node with copies of real's slices (as
// test/scale does) and removes both when the test ends.
func fakeNode(t *testing.T, real, name string, edit func(*corev1.Node)) {
	t.Helper()
	ctx := context.Background()
	_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		_ = client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
		// The plugin's DaemonSet placed a pod there that no kubelet runs.
		pods, _ := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		for _, p := range pods.Items {
			_ = client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	})
	// TaintNodesByCondition admission taints a new node not-ready; without
	// a kubelet nothing lifts it. The test sets the node's own taints.
	// (Controllers write the new node too: retried on conflict, for up to
	// some 10 s: on a loaded machine the node lifecycle and taint
	// controllers keep writing it for a while, past DefaultRetry's 50 ms.)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	err = retry.RetryOnConflict(wait.Backoff{Steps: 40, Duration: 50 * time.Millisecond, Factor: 1.2, Cap: time.Second}, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = nil
		edit(node)
		if node, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
		node.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	slices, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + real})
	if err != nil || len(slices.Items) == 0 {
		t.Fatalf("slices of %s: %d, %v", real, len(slices.Items), err)
	}
	for i, s := range slices.Items {
		s.ObjectMeta = metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i)}
		s.Spec.NodeName = ptr.To(name)
		s.Spec.Pool.Name = strings.ReplaceAll(s.Spec.Pool.Name, real, name)
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("slice for %s: %v", name, err)
		}
	}
}

// cpuForFits is a CPU request that leaves room for exactly n more pods on
// node: its allocatable less what its pods request, split n ways (n of
// it fit, n+1 do not).
func cpuForFits(t *testing.T, node string, n int64) resource.Quantity {
	t.Helper()
	ctx := context.Background()
	nd, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		t.Fatal(err)
	}
	free := nd.Status.Allocatable.Cpu().MilliValue()
	for i := range pods.Items {
		q := resourcehelper.PodRequests(&pods.Items[i], resourcehelper.PodResourcesOptions{})
		free -= q.Cpu().MilliValue()
	}
	if free < 3*n {
		t.Fatalf("node %s has %dm CPU free, too little to split", node, free)
	}
	return *resource.NewMilliQuantity(free/n, resource.DecimalSI)
}

func capDeployment(name string, cpu resource.Quantity, template string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	ctr := corev1.Container{Name: "ctr", Image: "localhost/busybox:latest", ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "3600"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu}}}
	spec := corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](1), Containers: []corev1.Container{ctr}}
	if template != "" {
		spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}}
		spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capNS}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}}}
}

func scale(t *testing.T, name string, n int) {
	t.Helper()
	kubectl(t, "-n", capNS, "scale", "deployment/"+name, fmt.Sprintf("--replicas=%d", n))
}

func capPods(t *testing.T, app string) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(capNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// podEvents are the pod's events, one line.
func podEvents(t *testing.T, pod string) string {
	t.Helper()
	list, err := client.CoreV1().Events(capNS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason+": "+e.Message)
	}
	return strings.Join(out, " | ")
}

// schedulingMessage is the pod's latest FailedScheduling message.
func schedulingMessage(t *testing.T, pod string) string {
	t.Helper()
	list, err := client.CoreV1().Events(capNS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	msg := ""
	for _, e := range list.Items {
		if e.Reason == "FailedScheduling" {
			msg = e.Message
		}
	}
	return msg
}
