// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestMultiNode's last step (multinode_test.go): the operator's view of
// the two nodes.

// `gpudra usage` lists both nodes' GPUs with the pods of the earlier steps
// where they run; `kubectl gpu capacity` counts both nodes' free GPUs, and
// for a pod that does not tolerate node 2's taint, none there.
func testUsageCapacityBothNodes(t *testing.T, node1, node2 string) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", filepath.Join(bin, "gpudra"), "./cmd/gpudra")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gpudra: %v\n%s", err, out)
	}
	if err := os.Symlink("gpudra", filepath.Join(bin, "kubectl-gpu")); err != nil {
		t.Fatal(err)
	}
	t.Logf("$ kubectl gpu usage\n%s", kubectlGPU(t, bin, "usage"))
	var usage struct {
		GPUs []fleetGPU `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(kubectlGPU(t, bin, "usage", "-o", "json")), &usage); err != nil {
		t.Fatal(err)
	}
	gpus, held := map[string]int{}, map[string][]string{}
	for _, g := range usage.GPUs {
		gpus[g.Node]++
		for _, h := range g.Holders {
			for _, p := range h.Pods {
				if strings.HasPrefix(p, multiNS+"/") {
					held[g.Node] = append(held[g.Node], p)
				}
			}
		}
	}
	if gpus[node1] != 8 || gpus[node2] != 4 || len(gpus) != 2 {
		t.Errorf("usage lists GPUs per node %v, want 8 on %s and 4 on %s", gpus, node1, node2)
	}
	if strings.Join(held[node1], ",") != multiNS+"/mps-1" || len(held[node2]) != 2 {
		t.Errorf("usage shows this test's pods %v, want mps-1 on %s, a100 and mps-2 on %s", held, node1, node2)
	}

	free := map[string]int{}
	for _, g := range usage.GPUs {
		if len(g.Holders) == 0 {
			free[g.Node]++
		}
	}
	var capacity struct {
		Total int `json:"total"`
		Nodes []struct {
			Node      string `json:"node"`
			Count     int    `json:"count"`
			StoppedBy *struct {
				Filter string `json:"filter"`
			} `json:"stoppedBy"`
		} `json:"nodes"`
	}
	counts := func(args ...string) map[string]int {
		t.Helper()
		out := kubectlGPU(t, bin, append([]string{"capacity", "-o", "json"}, args...)...)
		capacity.Nodes = nil
		if err := json.Unmarshal([]byte(out), &capacity); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		got := map[string]int{}
		for _, n := range capacity.Nodes {
			got[n.Node] = n.Count
		}
		t.Logf("$ kubectl gpu capacity %s: %v", strings.Join(args, " "), got)
		return got
	}
	// Claims for a node 2 GPU: as many as it has free whole GPUs.
	applyYAML(t, gpuTemplate("a100", multiNS, "device.attributes['gpu.nvidia.com'].productName == '"+node2Product+"' && !device.allowMultipleAllocations"))
	if got := counts("--template", multiNS+"/a100"); got[node2] != free[node2] || got[node1] != 0 {
		t.Errorf("capacity --template %s/a100: %v, want %d on %s (its free GPUs), 0 on %s", multiNS, got, free[node2], node2, node1)
	}
	// A pod of that template: none where it does not tolerate the taint.
	for _, tolerate := range []bool{false, true} {
		manifest := filepath.Join(t.TempDir(), "pod.yaml")
		pod := strings.Replace(multiPod("probe", "x", tolerate), "resourceClaimName: x", "resourceClaimTemplateName: a100", 1)
		if err := os.WriteFile(manifest, []byte(pod), 0o600); err != nil {
			t.Fatal(err)
		}
		got := counts("-f", manifest)
		want := map[bool]int{false: 0, true: free[node2]}[tolerate]
		if got[node2] != want {
			t.Errorf("capacity -f (a pod %s the taint): %d on %s, want %d", map[bool]string{false: "not tolerating", true: "tolerating"}[tolerate], got[node2], node2, want)
		}
		for _, n := range capacity.Nodes {
			if n.Node == node2 && !tolerate && (n.StoppedBy == nil || n.StoppedBy.Filter != "TaintToleration") {
				t.Errorf("capacity -f: %s stopped by %+v, want TaintToleration", node2, n.StoppedBy)
			}
		}
	}
	t.Logf("$ kubectl gpu usage --node %s\n%s", node2, kubectlGPU(t, bin, "usage", "--node", node2))

	// Such a pod, created: Pending, and diagnose names the taint that
	// keeps it off the one node with its GPUs.
	applyYAML(t, strings.Replace(multiPod("untolerated", "x", false), "resourceClaimName: x", "resourceClaimTemplateName: a100", 1))
	waitFor(t, "pod untolerated Unschedulable", 90*time.Second, func() (bool, string) {
		p := podIn(t, multiNS, "untolerated")
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				return true, ""
			}
		}
		return false, string(p.Status.Phase)
	})
	cmd := exec.Command(filepath.Join(bin, "gpudra"), "diagnose", "pod", multiNS+"/untolerated")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, _ := cmd.Output()
	t.Logf("$ gpudra diagnose pod %s/untolerated\n%s", multiNS, out)
	if !strings.Contains(string(out), gpuTaintKey) || !strings.Contains(string(out), node2) {
		t.Errorf("diagnose does not say that taint %s keeps the pod off %s:\n%s", gpuTaintKey, node2, out)
	}
}
