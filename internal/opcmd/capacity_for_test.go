// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// TestCapacityForFile: capacity -f counts a manifest's pod through the
// filters, here on a state read with --from: node n1 with 64 CPUs takes
// three pods of 20, and says NodeResourcesFit stops the fourth.
func TestCapacityForFile(t *testing.T) {
	state := fleetState(t)
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var s clusterview.Snapshot
	if err := yaml.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")}
	s.Nodes = []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: alloc}}}
	if data, err = yaml.Marshal(s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, data, 0o644); err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(t.TempDir(), "pod.yaml")
	manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: big, namespace: ml}\nspec: {containers: [{name: c, image: x, resources: {requests: {cpu: '20'}}}]}\n"
	if err := os.WriteFile(pod, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runFleet(NewCapacityCommand("gpudra"), "--from", state, "-f", pod)
	if err != nil || !strings.Contains(out, "n1    3     NodeResourcesFit: Insufficient cpu\n") || !strings.Contains(out, "TOTAL: 3 more pods of pod ml/big (file "+pod+") fit now") {
		t.Errorf("capacity -f: %v\n%s", err, out)
	}
	out, err = runFleet(NewCapacityCommand("gpudra"), "--from", state, "-f", pod, "-o", "json")
	if err != nil || !strings.Contains(out, `"filter": "NodeResourcesFit"`) || !strings.Contains(out, `"total": 3`) {
		t.Errorf("capacity -f -o json: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"--from", state, "--for", "deployment/web"},
		{"--from", state, "-f", pod, "--class", "gpu.nvidia.com"},
		{"--from", state, "-f", pod, "--for", "deployment/web"},
	} {
		if _, err := runFleet(NewCapacityCommand("gpudra"), args...); err == nil || !strings.Contains(err.Error(), "-f") {
			t.Errorf("%v: %v, want an error naming -f", args, err)
		}
	}
}
