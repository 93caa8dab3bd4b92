// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The second GPU node of `NODES=2 hack/e2e.sh` (hack/cluster/nodes.sh): its
// own kubelet and containerd on this host, tainted as GPU Operator nodes
// are, simulating deploy.sh's EXTRA_NODE_PROFILE next to node 1's H100s.
const (
	multiNS        = "gpu-multinode"
	node1Product   = "NVIDIA H100 80GB HBM3"
	node2Product   = "NVIDIA A100-SXM4-80GB"
	gpuTaintKey    = "nvidia.com/gpu"
	tolerateGPUTnt = `tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]`
)

// twoNodes returns node 1 (this host's name, hack/cluster's $NODE) and the
// second GPU node, or skips on a one-node cluster.
func twoNodes(t *testing.T) (node1, node2 string) {
	t.Helper()
	node1 = hostNode()
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Name != node1 && node2 == "" {
			node2 = n.Name
		}
	}
	if node2 == "" {
		t.Skipf("a one-node cluster (%d node): NODES=2 hack/e2e.sh starts a second GPU node (hack/cluster/nodes.sh)", len(nodes.Items))
	}
	return node1, node2
}

// hostPathOf is where a path of node's own (its /var/run/cdi, its kubelet
// directory) lies on this host: the path itself on node 1, the directory
// that an extra node's mount namespace binds over it otherwise.
func hostPathOf(node1, node, path string) string {
	if node == node1 {
		return path
	}
	cluster := envOr("GPU_DRA_CLUSTER_DIR", filepath.Join(os.Getenv("HOME"), ".cache", "gpu-dra-driver", "cluster"))
	return filepath.Join(cluster, "nodes", node, "host", path)
}

// multiPod is a busybox pod printing what it sees of its GPU, on a claim
// (resourceClaimName); tolerate lets it onto the tainted second node.
func multiPod(name, claim string, tolerate bool) string {
	tol := ""
	if tolerate {
		tol = "  " + tolerateGPUTnt + "\n"
	}
	return fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
%s  resourceClaims: [{name: gpu, resourceClaimName: %s}]
  containers:
  - {name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sh, -c, 'nvidia-smi -L; sleep 3600'], resources: {claims: [{name: gpu}]}}
`, name, multiNS, tol, claim)
}

// multiClaim is a claim for one whole GPU of a product, with GpuConfig
// parameters when config is not empty.
func multiClaim(name, product, config string) string {
	cfg := ""
	if config != "" {
		cfg = fmt.Sprintf(`    config:
    - requests: [gpu]
      opaque: {driver: %s, parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, %s}}
`, driverName, config)
	}
	return fmt.Sprintf(`---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %s, namespace: %s}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].productName == '%s' && !device.allowMultipleAllocations"}}]
%s`, name, multiNS, product, cfg)
}

// TestMultiNode runs the two-node scenarios in order on the cluster's two
// GPU nodes; they share the namespace and the pods of the earlier steps.
func TestMultiNode(t *testing.T) {
	node1, node2 := twoNodes(t)
	t.Logf("node 1 %s, node 2 %s", node1, node2)
	testNamespace(t, multiNS)
	for _, step := range []struct {
		name string
		fn   func(*testing.T, string, string)
	}{
		{"PoolPerNodeWithItsModel", testPoolPerNode},
		{"ClaimPreparedOnTheNodeOfItsModel", testClaimOnNode2},
		{"MPSDaemonPerNode", testMPSDaemonPerNode},
		{"Node2TokenCannotTouchNode1", testNode2Token},
		{"UsageAndCapacityListBothNodes", testUsageCapacityBothNodes},
	} {
		if !t.Run(step.name, func(t *testing.T) { step.fn(t, node1, node2) }) {
			t.FailNow()
		}
	}
}

// Each node publishes one pool of its own, named after it, whose GPUs are
// its own simulated model; node 2 carries the GPU node taint.
func testPoolPerNode(t *testing.T, node1, node2 string) {
	want := map[string]struct {
		product string
		gpus    int
	}{node1: {node1Product, 8}, node2: {node2Product, 4}}
	for node, w := range want {
		var slices []resourceapi.ResourceSlice
		waitFor(t, "the complete pool of "+node, 60*time.Second, func() (bool, string) {
			list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: nodeSlices(node)})
			if err != nil || len(list.Items) == 0 {
				return false, fmt.Sprint("no slices ", err)
			}
			slices = list.Items
			n := int64(0)
			for _, s := range slices {
				n = max(n, s.Spec.Pool.ResourceSliceCount)
			}
			return int64(len(slices)) == n, fmt.Sprintf("%d of %d slices", len(slices), n)
		})
		gpus := map[string]int{}
		for _, s := range slices {
			if s.Spec.Pool.Name != node {
				t.Errorf("slice %s of node %s is in pool %q", s.Name, node, s.Spec.Pool.Name)
			}
			for _, d := range s.Spec.Devices {
				if a := d.Attributes["type"]; a.StringValue != nil && *a.StringValue == "gpu" {
					gpus[*d.Attributes["productName"].StringValue]++
				}
			}
		}
		if len(gpus) != 1 || gpus[w.product] != w.gpus {
			t.Errorf("node %s publishes GPUs %v, want %d x %s", node, gpus, w.gpus, w.product)
		}
	}
	n, err := client.CoreV1().Nodes().Get(context.Background(), node2, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tainted := false
	for _, taint := range n.Spec.Taints {
		tainted = tainted || taint.Key == gpuTaintKey && taint.Effect == corev1.TaintEffectNoSchedule
	}
	if !tainted {
		t.Errorf("node %s has taints %v, want %s:NoSchedule", node2, n.Spec.Taints, gpuTaintKey)
	}
}

// A claim for node 2's model lands there and is prepared there: its CDI
// spec is in node 2's /var/run/cdi and not node 1's, and the container
// sees the allocated A100.
func testClaimOnNode2(t *testing.T, node1, node2 string) {
	applyYAML(t, multiClaim("a100", node2Product, "")+multiPod("a100", "a100", true))
	waitRunningIn(t, multiNS, "a100")
	p := podIn(t, multiNS, "a100")
	if p.Spec.NodeName != node2 {
		t.Fatalf("pod a100 runs on %s, want %s", p.Spec.NodeName, node2)
	}
	model, uuid, _ := gpuOfIn(t, multiNS, "a100", "ctr")
	claim, err := client.ResourceV1().ResourceClaims(multiNS).Get(context.Background(), "a100", metav1.GetOptions{})
	if err != nil || claim.Status.Allocation == nil {
		t.Fatalf("claim a100: %v, allocation %v", err, claim.Status.Allocation)
	}
	if model != node2Product || !strings.Contains(deviceUUIDs(t, node2, claim), uuid) {
		t.Errorf("container sees %s %s; claim allocated %v on %s", model, uuid, claim.Status.Allocation.Devices.Results, node2)
	}
	spec := "k8s." + driverName + "-claim_" + string(claim.UID) + "*.json"
	if m, _ := filepath.Glob(filepath.Join(hostPathOf(node1, node2, cdiDir), spec)); len(m) == 0 {
		t.Errorf("no CDI spec %s in node 2's %s (%s)", spec, cdiDir, hostPathOf(node1, node2, cdiDir))
	}
	if m, _ := filepath.Glob(filepath.Join(cdiDir, spec)); len(m) != 0 {
		t.Errorf("node 1's %s holds node 2's claim spec %v", cdiDir, m)
	}
}

// deviceUUIDs are the uuid attributes of the devices node publishes that
// claim was allocated.
func deviceUUIDs(t *testing.T, node string, claim *resourceapi.ResourceClaim) string {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: nodeSlices(node)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				if s.Spec.Pool.Name == r.Pool && d.Name == r.Device && d.Attributes["uuid"].StringValue != nil {
					out = append(out, *d.Attributes["uuid"].StringValue)
				}
			}
		}
	}
	return strings.Join(out, ",")
}

// An MPS claim on each node gets that node's own daemon pod: bound to the
// node, its name carrying the node (issue 55, defect 4).
func testMPSDaemonPerNode(t *testing.T, node1, node2 string) {
	mps := "sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50}}"
	applyYAML(t, multiClaim("mps-1", node1Product, mps)+multiPod("mps-1", "mps-1", false)+
		multiClaim("mps-2", node2Product, mps)+multiPod("mps-2", "mps-2", true))
	waitRunningIn(t, multiNS, "mps-1", "mps-2")
	for pod, node := range map[string]string{"mps-1": node1, "mps-2": node2} {
		if got := podIn(t, multiNS, pod).Spec.NodeName; got != node {
			t.Errorf("pod %s runs on %s, want %s", pod, got, node)
		}
		d := nodeDaemonPod(t, node)
		if !strings.HasPrefix(d.Name, "gpu-mps-"+node+"-") || d.Status.Phase != corev1.PodRunning {
			t.Errorf("node %s's MPS daemon pod %s (%s) is not gpu-mps-%s-<hash>, Running", node, d.Name, d.Status.Phase, node)
		}
	}
}

// nodeDaemonPod is the one MPS daemon pod bound to node.
func nodeDaemonPod(t *testing.T, node string) corev1.Pod {
	t.Helper()
	var found []corev1.Pod
	waitFor(t, "one MPS daemon pod on "+node, 60*time.Second, func() (bool, string) {
		found = nil
		for _, p := range daemonPods(t) {
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
				found = append(found, p)
			}
		}
		return len(found) == 1, fmt.Sprintf("%d daemon pods", len(found))
	})
	return found[0]
}

// Node 2's plugin, with the real token its pod holds, publishes and
// deletes on its own node, and can neither update node 1's ResourceSlices,
// delete node 1's MPS daemon pod nor create a pod under node 1's daemon
// pod name (server-side dry runs: nothing changes either way).
func testNode2Token(t *testing.T, node1, node2 string) {
	ctx := context.Background()
	plugin2 := pluginPodOn(t, node2)
	as2 := clientWithToken(t, podToken(t, node2, plugin2))
	slices := func(node string) []resourceapi.ResourceSlice {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: nodeSlices(node)})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("slices of %s: %v", node, err)
		}
		return list.Items
	}
	update := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	del := metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}
	// updateSlice labels the first slice of node (and edits it further),
	// again while the plugin's own writes make it a conflict.
	updateSlice := func(node string, edit func(*resourceapi.ResourceSlice)) (err error) {
		for range 5 {
			s := slices(node)[0]
			s.Labels = map[string]string{"gpu-dra-e2e/touched-by": node2}
			edit(&s)
			if _, err = as2.ResourceV1().ResourceSlices().Update(ctx, &s, update); !apierrors.IsConflict(err) {
				return err
			}
		}
		return err
	}
	if err := updateSlice(node2, func(*resourceapi.ResourceSlice) {}); err != nil {
		t.Fatalf("node 2's token cannot update its own slice, so the refusals below prove nothing: %v", err)
	}
	own := nodeDaemonPod(t, node2)
	if err := as2.CoreV1().Pods(driverNS).Delete(ctx, own.Name, del); err != nil {
		t.Fatalf("node 2's token cannot delete its own daemon pod %s: %v", own.Name, err)
	}

	refused(t, updateSlice(node1, func(*resourceapi.ResourceSlice) {}), "node 2's token updating a slice of node 1")
	refused(t, updateSlice(node1, func(s *resourceapi.ResourceSlice) { s.Spec.NodeName = &node2 }), "node 2's token moving a slice of node 1 onto node 2")
	d1 := nodeDaemonPod(t, node1)
	refused(t, as2.CoreV1().Pods(driverNS).Delete(ctx, d1.Name, del), "node 2's token deleting node 1's daemon pod "+d1.Name)

	// Defect 4: node 1's daemon pod name (and node label) on a pod of
	// node 2, which node 1's plugin would take for its own daemon.
	squat := daemonPodShape(t, node2)
	squat.Name = d1.Name
	_, err := as2.CoreV1().Pods(driverNS).Create(ctx, squat, dryRun)
	refused(t, err, "node 2's token creating a pod named like node 1's daemon "+d1.Name)
	if _, err := client.CoreV1().Pods(driverNS).Get(ctx, d1.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("node 1's daemon pod %s: %v", d1.Name, err)
	}
}

func refused(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", what)
	} else if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: failed, but not refused: %v", what, err)
	} else {
		t.Logf("%s: %v", what, err)
	}
}

func pluginPodOn(t *testing.T, node string) corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(driverNS).List(context.Background(), metav1.ListOptions{LabelSelector: pluginLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p
		}
	}
	t.Fatalf("no running plugin pod on %s", node)
	return corev1.Pod{}
}

// podToken reads the ServiceAccount token that the kubelet of node (an
// extra node of hack/cluster/nodes.sh) projected into pod: the kubelet
// mounts it on a tmpfs inside that node's mount namespace, which the
// namespace's first process ($CLUSTER/pids/<node>-ns) holds.
func podToken(t *testing.T, node string, pod corev1.Pod) string {
	t.Helper()
	cluster := envOr("GPU_DRA_CLUSTER_DIR", filepath.Join(os.Getenv("HOME"), ".cache", "gpu-dra-driver", "cluster"))
	pid, err := os.ReadFile(filepath.Join(cluster, "pids", node+"-ns"))
	if err != nil {
		t.Fatalf("node %s's mount namespace: %v", node, err)
	}
	glob := filepath.Join(kubeletDir, "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "*", "token")
	out, err := exec.Command("nsenter", "-t", strings.TrimSpace(string(pid)), "-m", "sh", "-c", "cat "+glob).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("token of %s in node %s's %s: %v", pod.Name, node, glob, err)
	}
	// One projected token volume: the glob must not have joined two.
	if strings.Count(string(out), ".") != 2 {
		t.Fatalf("%s holds more than one token", glob)
	}
	return strings.TrimSpace(string(out))
}

func clientWithToken(t *testing.T, token string) kubernetes.Interface {
	t.Helper()
	admin, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: admin.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: admin.CAFile, CAData: admin.CAData}}
	return kubernetes.NewForConfigOrDie(cfg)
}
