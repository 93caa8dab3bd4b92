// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// passthrough.enabled passes --passthrough-gpus; the vfio class is always
// there (like gpu and mig); bad GPU names and an unprivileged plugin on
// real GPUs are refused at render time with the fix.
func TestChartPassthroughValues(t *testing.T) {
	if out := string(helmTemplate(t)); strings.Contains(out, "--passthrough-gpus") {
		t.Error("passthrough flag rendered by default")
	}
	if !slices.Contains(classNames(t), "vfio.gpu.nvidia.com") {
		t.Error("no vfio.gpu.nvidia.com DeviceClass")
	}
	out := string(helmTemplate(t, "passthrough.enabled=true", "passthrough.gpus={0000:3b:00.0,3}"))
	if !strings.Contains(out, "--passthrough-gpus=0000:3b:00.0,3") {
		t.Errorf("plugin args lack --passthrough-gpus=0000:3b:00.0,3")
	}
	if out := string(helmTemplate(t, "passthrough.enabled=true", "simulate.profile=h100x2", "kubeletPlugin.privileged=false")); !strings.Contains(out, "--passthrough-gpus=all") {
		t.Errorf("simulated passthrough not rendered")
	}
	for _, set := range [][]string{{"passthrough.gpus={gpu0}"}, {"passthrough.enabled=true", "kubeletPlugin.privileged=false"}} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := exec.Command(helmBinary(t), args...).CombinedOutput(); err == nil {
			t.Errorf("--set %v rendered:\n%.300s", set, out)
		} else if strings.Contains(strings.Join(set, ","), "privileged") && !strings.Contains(string(out), "kubeletPlugin.privileged=true") {
			t.Errorf("--set %v: error does not say the fix: %s", set, out)
		}
	}
}
