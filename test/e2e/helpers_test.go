// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package e2e runs the driver on a real local cluster (hack/cluster): the
// chart installed with simulated H100s, real pods, real scheduler, kubelet
// and containerd. Run it with `make e2e`.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	ns         = "gpu-demo"
	driverNS   = "gpu-dra-driver"
	driverName = "gpu.nvidia.com"
)

var (
	client     kubernetes.Interface
	kubeconfig = os.Getenv("KUBECONFIG")
	kubeletDir = envOr("GPU_DRA_KUBELET_DIR", "/var/lib/gdra-kubelet")
	cdiDir     = "/var/run/cdi"
	repoRoot   = filepath.Join("..", "..")
	gpuLine    = regexp.MustCompile(`GPU \d+: (.+) \(UUID: (GPU-[0-9a-f-]+)\)`)
	migLine    = regexp.MustCompile(`MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[0-9a-f-]+)\)`)
)

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

func TestMain(m *testing.M) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e needs KUBECONFIG of a running cluster (make e2e sets it):", err)
		os.Exit(1)
	}
	client = kubernetes.NewForConfigOrDie(cfg)
	os.Exit(m.Run())
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("kubectl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func apply(t *testing.T, spec string) {
	t.Helper()
	kubectl(t, "apply", "-f", filepath.Join(repoRoot, "demo", "specs", spec))
}

func applyYAML(t *testing.T, yaml string) {
	t.Helper()
	cmd := exec.Command("kubectl", "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(yaml)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return podIn(t, ns, name)
}

func podIn(t *testing.T, namespace, name string) *corev1.Pod {
	t.Helper()
	p, err := client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitRunning(t *testing.T, names ...string) {
	t.Helper()
	waitRunningIn(t, ns, names...)
}

func waitRunningIn(t *testing.T, namespace string, names ...string) {
	t.Helper()
	for _, name := range names {
		waitFor(t, "pod "+name+" Running", 90*time.Second, func() (bool, string) {
			p, err := client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
		})
	}
}

// gpuOf returns what the nvidia-smi stand-in printed in a container.
func gpuOf(t *testing.T, podName, container string) (model, uuid string, migs []string) {
	t.Helper()
	return gpuOfIn(t, ns, podName, container)
}

// gpuOfIn is gpuOf for a pod of another namespace.
func gpuOfIn(t *testing.T, namespace, podName, container string) (model, uuid string, migs []string) {
	t.Helper()
	var out string
	waitFor(t, "nvidia-smi output of "+podName+"/"+container, 30*time.Second, func() (bool, string) {
		args := []string{"logs", "-n", namespace, podName}
		if container != "" {
			args = append(args, "-c", container)
		}
		b, err := exec.Command("kubectl", args...).CombinedOutput()
		out = string(b)
		return err == nil && gpuLine.MatchString(out), out
	})
	m := gpuLine.FindStringSubmatch(out)
	for _, mm := range migLine.FindAllStringSubmatch(out, -1) {
		migs = append(migs, mm[1]+"="+mm[2])
	}
	return m[1], m[2], migs
}

func deletePods(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		_ = client.CoreV1().Pods(ns).Delete(context.Background(), n, metav1.DeleteOptions{})
	}
	for _, n := range names {
		waitFor(t, "pod "+n+" gone", 60*time.Second, func() (bool, string) {
			_, err := client.CoreV1().Pods(ns).Get(context.Background(), n, metav1.GetOptions{})
			return err != nil, "still there"
		})
	}
}

func events(t *testing.T, kind, name string) string {
	t.Helper()
	list, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "%s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// hostNode is node 1's name: this host's, hack/cluster's $NODE, the node
// whose host paths and GPUs the tests read; a cluster with NODES=2 has
// another node too.
func hostNode() string {
	node, _ := os.Hostname()
	return node
}

// nodeSlices selects this driver's ResourceSlices of node.
func nodeSlices(node string) string {
	return "spec.driver=" + driverName + ",spec.nodeName=" + node
}

// node1Slices selects this driver's ResourceSlices of node 1, the node
// whose GPUs the tests count.
func node1Slices() string { return nodeSlices(hostNode()) }

func stateDir() string { return filepath.Join(kubeletDir, "plugins", driverName) }

func cdiSpecs() []string {
	m, _ := filepath.Glob(filepath.Join(cdiDir, "k8s."+driverName+"-claim_*.json"))
	return m
}

func checkpointRecords() []string {
	m, _ := filepath.Glob(filepath.Join(stateDir(), "checkpoint", "*.json"))
	return m
}

// pluginLabel selects the kubelet plugin's pods: the driver namespace also
// holds the webhook's and the MPS daemons'.
const pluginLabel = "app.kubernetes.io/name=gpu-dra-driver"

// pluginPodList lists the plugin pods of node 1 (this host's name,
// hack/cluster's $NODE), whose host paths the tests read, bound there or
// not bound yet. On a cluster with more nodes (NODES=2) the others'
// plugin pods are not node 1's: multinode_test.go looks them up by node.
func pluginPodList(t *testing.T) []corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(driverNS).List(context.Background(), metav1.ListOptions{LabelSelector: pluginLabel})
	if err != nil {
		t.Fatal(err)
	}
	node := hostNode()
	var out []corev1.Pod
	for _, p := range pods.Items {
		n := p.Spec.NodeName
		if n == "" {
			n = dsTarget(p)
		}
		if n == node || n == "" {
			out = append(out, p)
		}
	}
	return out
}

// dsTarget is the node a DaemonSet pod not yet bound is for: the
// DaemonSet controller pins each pod to its node with a required
// metadata.name node affinity. Empty when the pod has none.
func dsTarget(p corev1.Pod) string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// waitPluginReady waits for the one plugin pod of node 1
// to be one that want accepts, not terminating, and Ready. Ready means its
// health monitor watches NVML events (/readyz): a fault injected earlier
// would be a fault from before the start, which NVML reports without its
// XID.
func waitPluginReady(t *testing.T, what string, want func(corev1.Pod) bool) {
	t.Helper()
	waitFor(t, what, 180*time.Second, func() (bool, string) {
		pods := pluginPodList(t)
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d plugin pods", len(pods))
		}
		p := pods[0]
		if p.DeletionTimestamp != nil || !want(p) {
			return false, "old plugin pod " + p.Name
		}
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready, string(p.Status.Phase)
	})
}

// gpuTemplate is a ResourceClaimTemplate for one GPU that a CEL selector
// picks, the request named "gpu".
func gpuTemplate(name, namespace, selector string) string {
	return classTemplate(name, namespace, "gpu.nvidia.com", selector)
}

// classTemplate is a ResourceClaimTemplate for one device of a class that
// a CEL selector picks, the request named "gpu".
func classTemplate(name, namespace, class, selector string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: %s, namespace: %s}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: %s
          selectors: [{cel: {expression: %q}}]
`, name, namespace, class, selector)
}

// badConfigTemplate has a GpuConfig with a misspelt field (intervall),
// which the plugin refuses at prepare and the webhook at admission.
func badConfigTemplate(namespace string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bad-config, namespace: %s}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {intervall: Long}}}
`, namespace)
}
