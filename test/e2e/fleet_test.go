// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const fleetNS = "gpu-fleet"

// fleetSpecs put the node's eight H100s (GPU 7 offered for memory
// fractions, the others dynamic MIG: hack/cluster/deploy.sh) to every use:
// a pod with one whole GPU, a pod with four, a time-sliced claim shared by
// two pods, a 20Gi memory fraction and one 1g.10gb MIG device. That leaves
// one GPU with six free 1g.10gb placements.
const fleetSpecs = `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: whole, namespace: gpu-fleet}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: four, namespace: gpu-fleet}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 4, selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-1g, namespace: gpu-fleet}
spec: {spec: {devices: {requests: [{name: mig, exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: frac-20gi, namespace: gpu-fleet}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, capacity: {requests: {memory: 20Gi}}, selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: gpu-fleet}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]}}]
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}}
`

func fleetPod(name, claimRef string) string {
	return fmt.Sprintf(`
---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: gpu-fleet}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, %s}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpu}]}}]
`, name, claimRef)
}

// fleetGPU is the part of `gpudra usage -o json` the test reads.
type fleetGPU struct {
	Node    string `json:"node"`
	Index   int    `json:"index"`
	Use     string `json:"use"`
	Holders []struct {
		Claim   string   `json:"claim"`
		Pods    []string `json:"pods"`
		Profile string   `json:"profile"`
		Sharing string   `json:"sharing"`
	} `json:"holders"`
	FractionUsedBytes int64 `json:"fractionUsedBytes"`
}

// TestFleetView runs `gpudra usage` and `gpudra capacity` (the latter also
// as the kubectl plugin `kubectl gpu`) on the local cluster, then proves
// the capacity: exactly that many pods all run, and one more stays
// Pending.
func TestFleetView(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", filepath.Join(bin, "gpudra"), "./cmd/gpudra")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gpudra: %v\n%s", err, out)
	}
	if err := os.Symlink("gpudra", filepath.Join(bin, "kubectl-gpu")); err != nil {
		t.Fatal(err)
	}
	gpudra := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "gpudra"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpudra %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	testNamespace(t, fleetNS)
	applyYAML(t, fleetSpecs+fleetPod("whole", "resourceClaimTemplateName: whole")+fleetPod("four", "resourceClaimTemplateName: four")+
		fleetPod("shared-1", "resourceClaimName: shared")+fleetPod("shared-2", "resourceClaimName: shared")+
		fleetPod("frac", "resourceClaimTemplateName: frac-20gi")+fleetPod("mig-0", "resourceClaimTemplateName: mig-1g"))
	waitRunningIn(t, fleetNS, "whole", "four", "shared-1", "shared-2", "frac", "mig-0")

	t.Logf("$ gpudra usage\n%s", gpudra("usage"))
	var usage struct {
		GPUs []fleetGPU `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(gpudra("usage", "-o", "json", "--namespace", fleetNS)), &usage); err != nil {
		t.Fatal(err)
	}
	uses := map[string][]fleetGPU{}
	for _, g := range usage.GPUs {
		uses[g.Use] = append(uses[g.Use], g)
	}
	if len(usage.GPUs) != 8 || len(uses["whole"]) != 5 || len(uses["shared"]) != 1 || len(uses["fraction"]) != 1 || len(uses["mig"]) != 1 {
		t.Fatalf("usage of the node's 8 GPUs: %+v; want 5 whole, 1 shared, 1 fraction, 1 MIG", uses)
	}
	if sh := uses["shared"][0].Holders[0]; sh.Sharing != "time-slicing Long" || strings.Join(sh.Pods, ",") != "gpu-fleet/shared-1,gpu-fleet/shared-2" {
		t.Errorf("shared GPU holder %+v", sh)
	}
	if f := uses["fraction"][0]; f.FractionUsedBytes != 20<<30 || f.Holders[0].Pods[0] != "gpu-fleet/frac" {
		t.Errorf("fraction GPU %+v", f)
	}
	if m := uses["mig"][0]; len(m.Holders) != 1 || m.Holders[0].Profile != "1g.10gb" || m.Holders[0].Pods[0] != "gpu-fleet/mig-0" {
		t.Errorf("MIG GPU %+v", m)
	}
	node := usage.GPUs[0].Node

	// The kubectl plugin, as an operator runs it.
	plugin := exec.Command("kubectl", "gpu", "capacity", "--mig-profile", "1g.10gb", "-o", "json")
	plugin.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := plugin.Output()
	if err != nil {
		t.Fatalf("kubectl gpu capacity: %v\n%s", err, out)
	}
	var capacity struct {
		Total int `json:"total"`
		Nodes []struct {
			Node  string `json:"node"`
			Count int    `json:"count"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out, &capacity); err != nil {
		t.Fatal(err)
	}
	// Six on this node and none elsewhere: the second node's A100s have
	// MIG mode off (an A100 needs a reset to turn it on), so they publish
	// no MIG devices, and it is listed with 0.
	onNode, listed := -1, map[string]bool{}
	for _, n := range capacity.Nodes {
		listed[n.Node] = true
		switch {
		case n.Node == node:
			onNode = n.Count
		case n.Count != 0:
			t.Errorf("kubectl gpu capacity --mig-profile 1g.10gb: %d on node %s, want 0 (no MIG devices published there)", n.Count, n.Node)
		}
	}
	if want := readyNodes(t); len(listed) != want {
		t.Errorf("kubectl gpu capacity --mig-profile 1g.10gb lists %d nodes %v, want every one of the %d GPU nodes", len(listed), listed, want)
	}
	if capacity.Total != 6 || onNode != 6 {
		t.Fatalf("kubectl gpu capacity --mig-profile 1g.10gb: %s; want 6 on %s", out, node)
	}
	for _, args := range [][]string{{"--mig-profile", "1g.10gb"}, {"--template", fleetNS + "/mig-1g"}, {"--template", fleetNS + "/frac-20gi"}, {"--class", "gpu.nvidia.com"}} {
		t.Logf("$ gpudra capacity %s\n%s", strings.Join(args, " "), gpudra(append([]string{"capacity"}, args...)...))
	}
	if text := gpudra("capacity", "--template", fleetNS+"/mig-1g"); !strings.Contains(text, "TOTAL: 6 more") {
		t.Errorf("--template %s/mig-1g does not count 6:\n%s", fleetNS, text)
	}
	if text := gpudra("capacity", "--template", fleetNS+"/frac-20gi"); !strings.Contains(text, "TOTAL: 3 more") {
		t.Errorf("--template %s/frac-20gi: 60Gi of GPU 7 are left, want 3:\n%s", fleetNS, text)
	}

	// The proof: six more 1g.10gb pods run, a seventh stays Pending.
	var spec strings.Builder
	var names []string
	for i := 1; i <= capacity.Total; i++ {
		names = append(names, fmt.Sprintf("mig-%d", i))
		spec.WriteString(fleetPod(names[i-1], "resourceClaimTemplateName: mig-1g"))
	}
	applyYAML(t, spec.String())
	waitRunningIn(t, fleetNS, names...)
	applyYAML(t, fleetPod("one-more", "resourceClaimTemplateName: mig-1g"))
	waitFor(t, "one-more Unschedulable", 90*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(fleetNS).Get(context.Background(), "one-more", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, string(p.Status.Phase)
	})
	if text := gpudra("capacity", "--mig-profile", "1g.10gb"); !strings.Contains(text, "TOTAL: 0 more") {
		t.Errorf("capacity after filling the node:\n%s", text)
	}
	t.Logf("$ kubectl gpu usage --node %s   # node full\n%s", node, kubectlGPU(t, bin, "usage", "--node", node))
}

func kubectlGPU(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"gpu"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl gpu %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
