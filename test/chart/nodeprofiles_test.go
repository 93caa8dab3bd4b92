// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// simulate.nodeProfiles: one DaemonSet simulates a mixed fleet. Every
// plugin pod gets the whole list (the plugin picks its NODE_NAME's entry,
// internal/plugincmd TestNodeProfile), in a stable order so that a
// re-render does not roll the DaemonSet.
func TestChartSimulateNodeProfiles(t *testing.T) {
	c := plugin(t, render(t, "simulate.profile=h100x8", "simulate.nodeProfiles.gpu-b=a100-80gbx4:mig", "simulate.nodeProfiles.gpu-a=h200x8"))
	if got, _ := env(c, "SIMULATE_NODE_PROFILES"); got != "gpu-a=h200x8,gpu-b=a100-80gbx4:mig" {
		t.Errorf("SIMULATE_NODE_PROFILES = %q", got)
	}
	if got, _ := env(c, "SIMULATE_PROFILE"); got != "h100x8" {
		t.Errorf("SIMULATE_PROFILE = %q, want the unnamed nodes' h100x8", got)
	}
	if got := envFrom(c, "NODE_NAME"); got != "spec.nodeName" {
		t.Errorf("NODE_NAME from %q: the plugin could not tell its entry", got)
	}
	if _, ok := env(plugin(t, render(t, "simulate.profile=h100x8")), "SIMULATE_NODE_PROFILES"); ok {
		t.Error("SIMULATE_NODE_PROFILES set without simulate.nodeProfiles")
	}
	for _, bad := range [][]string{
		{"simulate.nodeProfiles.gpu-a=h200x8"},                                // real GPUs elsewhere: not one DaemonSet's job
		{"simulate.profile=h100x8", "simulate.nodeProfiles.gpu-a=h200"},       // no count
		{"simulate.profile=h100x8", "simulate.nodeProfiles.gpu-a=h200x8:MIG"}, // the plugin's suffix is :mig
	} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2"}
		for _, s := range bad {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "nodeProfiles") {
			t.Errorf("%v: rendered, or an error not naming nodeProfiles: %v\n%.300s", bad, err, out)
		}
	}
}

// Production GPU nodes are commonly tainted nvidia.com/gpu=present:
// NoSchedule (the GPU Operator's and cloud providers' GPU node pools),
// which keeps other pods off them; the GPU driver's own DaemonSet must
// still run there, simulated or not (the local cluster's second node is
// tainted so).
func TestChartPluginToleratesGPUNodeTaint(t *testing.T) {
	taint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	for _, set := range [][]string{nil, {"simulate.profile=h100x8"}} {
		spec := render(t, set...).Spec.Template.Spec
		ok := false
		for _, tol := range spec.Tolerations {
			ok = ok || tol.ToleratesTaint(klog.Background(), &taint, false)
		}
		if !ok {
			t.Errorf("%v: tolerations %v do not tolerate %v", set, spec.Tolerations, taint)
		}
	}
}
