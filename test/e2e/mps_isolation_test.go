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

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The second namespace of the isolation test.
const mpsNS2 = "gpu-mps-2"

// isolationPod is a memory-fraction claim in ns with a pod of two
// containers using it: "client", a simulated MPS client that stays
// connected to the daemon's control socket (so a read-only pipe directory
// is shown to still let clients connect), and "sh", a busybox shell for the
// attacks.
func isolationPod(t *testing.T, ns, name string) {
	t.Helper()
	applyYAML(t, fmt.Sprintf(`
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        capacity: {requests: {memory: 10Gi}}
        selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]
---
apiVersion: v1
kind: Pod
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimName: %[1]s}]
  containers:
  - {name: client, image: %[3]s, imagePullPolicy: IfNotPresent, command: [/usr/bin/gpu-kubelet-plugin, mps-client-standin], resources: {claims: [{name: gpu}]}}
  - {name: sh, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpu}]}}
`, name, ns, driverImage(t)))
}

// shIn runs a shell command in the "sh" container of a pod and returns its
// output and whether it succeeded.
func shIn(ns, pod, script string) (string, bool) {
	out, err := exec.Command("kubectl", "-n", ns, "exec", pod, "-c", "sh", "--", "sh", "-c", script).CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// pluginArg is the value of a --name= argument of the plugin's DaemonSet,
// or "" when it has none.
func pluginArg(t *testing.T, name string) string {
	t.Helper()
	ds, err := client.AppsV1().DaemonSets(driverNS).Get(context.Background(), pluginDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// TestMPSTenantIsolation: the attacks of issue 42 on MPS, as a tenant.
// (a) A client cannot plant a symlink in the daemon's log directory (the
// daemon, as root, would open its log through it): clients get no log
// directory. (b) A client cannot rename or replace the daemon's control
// socket: the pipe directory is mounted read-only, and a client still
// connects through it. (c) /dev/shm is the daemon's own size-limited
// tmpfs, not a directory on the node's disk, and a claim from another
// namespace on the same GPU does not share it: by default its prepare is
// refused with an error that names both namespaces and the chart value.
func TestMPSTenantIsolation(t *testing.T) {
	mpsNamespace(t)
	isolationPod(t, mpsNS, "iso-a")
	waitMPSRunning(t, "iso-a")
	d := currentDaemon(t)
	daemonDir := filepath.Join(stateDir(), "mps", d.device)
	waitFor(t, "iso-a's client connected to its daemon", 30*time.Second, func() (bool, string) {
		logs := kubectl(t, "logs", "-n", mpsNS, "iso-a", "-c", "client")
		return heartbeat.MatchString(logs), logs
	})

	// (a) control.log -> /etc/shadow in the log directory.
	if out, ok := shIn(mpsNS, "iso-a", "ln -s /etc/shadow /var/log/nvidia-mps/control.log"); ok {
		t.Errorf("(a) a client created a symlink in the MPS log directory: %s", out)
	}
	if _, err := os.Lstat(filepath.Join(daemonDir, "log", "control.log")); err == nil {
		t.Errorf("(a) %s/log/control.log exists on the host", daemonDir)
	}

	// (b) rename the control socket, or put a file next to it.
	out, ok := shIn(mpsNS, "iso-a", "mv /tmp/nvidia-mps/control /tmp/nvidia-mps/stolen")
	if ok || !strings.Contains(out, "Read-only file system") {
		t.Errorf("(b) renaming the control socket: want EROFS, got ok=%v: %s", ok, out)
	}
	if out, ok := shIn(mpsNS, "iso-a", "touch /tmp/nvidia-mps/fake"); ok || !strings.Contains(out, "Read-only file system") {
		t.Errorf("(b) creating a file in the pipe directory: want EROFS, got ok=%v: %s", ok, out)
	}
	if _, err := os.Stat(filepath.Join(daemonDir, "pipe", "control")); err != nil {
		t.Errorf("(b) the control socket is gone: %v", err)
	}

	// (c) /dev/shm: the daemon's (a marker shows up in its directory on
	// the host), a tmpfs, and full at the chart's size.
	size := resource.MustParse("256Mi")
	if v := pluginArg(t, "mps-shm-size"); v != "" {
		size = resource.MustParse(v)
	}
	if out, ok := shIn(mpsNS, "iso-a", "echo tenant-a > /dev/shm/marker && grep ' /dev/shm ' /proc/mounts"); !ok || !strings.HasPrefix(strings.Fields(out + " x x")[2], "tmpfs") {
		t.Errorf("(c) /dev/shm of a client is not a tmpfs: ok=%v: %s", ok, out)
	}
	if _, err := os.Stat(filepath.Join(daemonDir, "shm", "marker")); err != nil {
		t.Errorf("(c) the client's /dev/shm is not its daemon's: %v", err)
	}
	over := size.Value()>>20 + 1
	out, ok = shIn(mpsNS, "iso-a", fmt.Sprintf("dd if=/dev/zero of=/dev/shm/fill bs=1M count=%d 2>&1; rc=$?; rm -f /dev/shm/fill; exit $rc", over))
	if ok || !strings.Contains(out, "No space left on device") {
		t.Errorf("(c) writing %d MiB into a %s /dev/shm: want ENOSPC, got ok=%v: %s", over, size.String(), ok, out)
	}

	// The second namespace, with cross-namespace sharing off (deploy.sh
	// turns it on for the demo's two namespaces).
	if pluginArg(t, "mps-share-across-namespaces") == "true" {
		chart := filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver")
		old := pluginPods(t)
		helm(t, "upgrade", helmRelease, chart, "-n", driverNS, "--reuse-values", "--set", "sharing.mps.shareAcrossNamespaces=false", "--wait", "--timeout", "180s")
		t.Cleanup(func() {
			_ = exec.Command("helm", "upgrade", helmRelease, chart, "-n", driverNS, "--reuse-values", "--set", "sharing.mps.shareAcrossNamespaces=true", "--wait", "--timeout", "180s").Run()
		})
		waitNewPlugin(t, old)
	}
	kubectl(t, "create", "namespace", mpsNS2)
	t.Cleanup(func() { _ = exec.Command("kubectl", "delete", "namespace", mpsNS2, "--wait=true").Run() })
	isolationPod(t, mpsNS2, "iso-b")
	var why string
	waitFor(t, "iso-b (another namespace, same GPU) refused at prepare, or running", 60*time.Second, func() (bool, string) {
		if p := podIn(t, mpsNS2, "iso-b"); p.Status.Phase == "Running" {
			return true, ""
		}
		list, err := client.CoreV1().Events(mpsNS2).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=iso-b"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "FailedPrepareDynamicResources" {
				why = e.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	if why == "" {
		out, _ := shIn(mpsNS2, "iso-b", "cat /dev/shm/marker")
		t.Fatalf("(c) a claim of namespace %s shares the MPS daemon of %s (its /dev/shm holds %q)", mpsNS2, mpsNS, out)
	}
	for _, want := range []string{mpsNS, mpsNS2, "sharing.mps.shareAcrossNamespaces"} {
		if !strings.Contains(why, want) {
			t.Errorf("(c) the prepare error does not name %q: %s", want, why)
		}
	}
	if p := podIn(t, mpsNS2, "iso-b"); p.Status.Phase == "Running" {
		t.Errorf("(c) iso-b runs after its prepare was refused")
	}
}
