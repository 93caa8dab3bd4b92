// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testPluginPodHardened checks the simulated-mode plugin as it runs: the
// process has no capabilities, no_new_privs and a seccomp filter, its root
// is read-only, it writes the status of a claim it prepared with the
// chart's narrowed RBAC, and what it leaves on the host is closed to others
// (README, "Security").
func testPluginPodHardened(t *testing.T) {
	ctx := context.Background()
	pid := pluginPID(t)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(string(status), want+"\n") {
			t.Errorf("plugin process %d: no %q in /proc/%d/status", pid, want, pid)
		}
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" && !strings.HasPrefix(f[5], "ro") {
			t.Errorf("plugin's root filesystem is mounted %s", f[5])
		}
	}

	applyYAML(t, `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: hardened, namespace: gpu-demo}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: v1
kind: Pod
metadata: {name: hardened, namespace: gpu-demo}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimName: hardened}]
  containers:
  - name: ctr
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'nvidia-smi -L; sleep 3600']
    resources: {claims: [{name: gpu}]}
`)
	defer func() {
		deletePods(t, "hardened")
		_ = client.ResourceV1().ResourceClaims(ns).Delete(ctx, "hardened", metav1.DeleteOptions{})
		waitFor(t, "claim hardened gone", 60*time.Second, func() (bool, string) {
			_, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "hardened", metav1.GetOptions{})
			return err != nil, "still there"
		})
	}()
	waitRunning(t, "hardened")
	_, uuid, _ := gpuOf(t, "hardened", "")
	// status.devices needs resourceclaims/status patch and
	// resourceclaims/driver associated-node:patch, nothing more.
	waitFor(t, "device status of claim hardened", 30*time.Second, func() (bool, string) {
		c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "hardened", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, d := range c.Status.Devices {
			if d.Driver == driverName && d.Data != nil && strings.Contains(string(d.Data.Raw), uuid) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", c.Status.Devices)
	})

	// What a prepared claim leaves: checkpoint, CDI spec, sockets, the
	// simulator's files.
	requireClosedToOthers(t, stateDir(), "")
	requireClosedToOthers(t, filepath.Join(kubeletDir, "plugins_registry"), driverName)
	requireClosedToOthers(t, cdiDir, "k8s."+driverName)
	if info, err := os.Stat(stateDir()); err != nil || info.Mode().Perm() != 0o750 {
		t.Errorf("plugin directory %s: %v %v, want 0750", stateDir(), info.Mode().Perm(), err)
	}
}

// requireClosedToOthers walks dir (at its top level only the entries whose
// name contains mine): nothing world-writable, sockets 0750 or tighter.
func requireClosedToOthers(t *testing.T, dir, mine string) {
	t.Helper()
	sockets := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if filepath.Dir(path) == dir && !strings.Contains(d.Name(), mine) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode&fs.ModeSymlink != 0:
		case mode&fs.ModeSocket != 0:
			sockets++
			if mode.Perm()&^0o750 != 0 {
				t.Errorf("socket %s: mode %v, want 0750 or tighter", path, mode.Perm())
			}
		case mode.Perm()&0o002 != 0:
			t.Errorf("%s is world-writable (%v)", path, mode.Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(dir, kubeletDir) && sockets == 0 {
		t.Errorf("no socket of the plugin under %s", dir)
	}
}

// pluginPID finds the running plugin container's process on this host.
func pluginPID(t *testing.T) int {
	t.Helper()
	pods := pluginPodList(t)
	if len(pods) == 0 {
		t.Fatal("no plugin pod")
	}
	var id string
	for _, p := range pods {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "plugin" && s.State.Running != nil && p.Status.Phase == corev1.PodRunning {
				id = strings.TrimPrefix(s.ContainerID, "containerd://")
			}
		}
	}
	out, err := exec.Command("ctr", "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil || id == "" {
		t.Fatalf("plugin container %q: ctr tasks ls: %v: %s", id, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == id && f[2] == "RUNNING" {
			pid, _ := strconv.Atoi(f[1])
			return pid
		}
	}
	t.Fatalf("no running task for the plugin container %s:\n%s", id, out)
	return 0
}
