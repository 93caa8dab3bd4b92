// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// simulate.nodeMode=devices: the simulated plugin stays hardened but keeps
// CAP_MKNOD (it creates the simulated GPUs' device nodes), and mounts the
// real driver root read-only and the hook directory, as on real GPUs.
func TestChartSimulatedDevicesNodeMode(t *testing.T) {
	ds := render(t, "simulate.profile=h100x8", "simulate.nodeMode=devices", "sharing.strategies={TimeSlicing}",
		"driverName="+testDriver, "kubeletDir=/var/lib/k", "cdiRoot=/etc/cdi", "driverRoot=/opt/nvidia-root",
		"kubeletPlugin.privileged=true", "kubeletPlugin.capabilities={SYS_ADMIN}")
	requirePodLevel(t, ds, false)
	requireHardened(t, ds, "MKNOD")
	want := sorted(
		hostMount{host: "/var/lib/k/plugins/" + testDriver, container: "/var/lib/k/plugins/" + testDriver}.String(),
		hostMount{host: "/var/lib/k/plugins_registry", container: "/var/lib/k/plugins_registry"}.String(),
		hostMount{host: "/etc/cdi", container: "/etc/cdi"}.String(),
		hostMount{host: "/opt/nvidia-root", container: "/driver-root", readOnly: true, propagation: corev1.MountPropagationHostToContainer}.String(),
		hostMount{host: "/var/lib/gpu-dra-driver/bin", container: "/var/lib/gpu-dra-driver/bin"}.String(),
	)
	if got := hostMounts(t, ds); !slices.Equal(got, want) {
		t.Errorf("devices node mode mounts\n got %v\nwant %v", got, want)
	}
	c := plugin(t, ds)
	if v, _ := env(c, "SIMULATE_NODE_MODE"); v != "devices" {
		t.Errorf("SIMULATE_NODE_MODE = %q, want devices", v)
	}
	for _, arg := range []string{"--driver-root=/driver-root", "--host-driver-root=/opt/nvidia-root", "--cdi-hook-install-dir=/var/lib/gpu-dra-driver/bin"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %v lack %s", c.Args, arg)
		}
	}
	// files (the default) is the simulated node of TestChartSimulatedPodIsHardened.
	if v, ok := env(plugin(t, render(t, "simulate.profile=h100x8", "simulate.nodeMode=files")), "SIMULATE_NODE_MODE"); ok {
		t.Errorf("files node mode sets SIMULATE_NODE_MODE=%q", v)
	}
}

func TestChartSchemaRefusesUnknownNodeMode(t *testing.T) {
	args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2", "--set", "simulate.profile=h100x8", "--set", "simulate.nodeMode=gpus"}
	out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "nodeMode") {
		t.Errorf("simulate.nodeMode=gpus: err %v\n%.400s", err, out)
	}
}
