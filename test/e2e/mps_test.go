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
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The MPS tests run simulated MPS clients (the plugin image's
// mps-client-standin, which stays connected to its daemon's control socket
// and fails when the daemon goes) on GPU 7, which deploy.sh offers for
// memory-fraction sharing, in a namespace of their own.
const (
	mpsNS         = "gpu-mps"
	daemonLabel   = "app.kubernetes.io/component=mps-control-daemon"
	pluginDS      = "gpu-dra-driver-kubelet-plugin"
	helmRelease   = "gpu-dra-driver"
	heartbeatLine = `(\S+) simulated MPS control daemon pid=(\d+)`
)

var heartbeat = regexp.MustCompile(heartbeatLine)

// mpsClaimAndClient is a memory-fraction claim (and optionally a compute
// share) with a simulated MPS client using it.
func mpsClaimAndClient(t *testing.T, name, memory, compute string) {
	t.Helper()
	caps := "memory: " + memory
	if compute != "" {
		caps += `, computePercentage: "` + compute + `"`
	}
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
        capacity: {requests: {%[3]s}}
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
  - name: client
    image: %[4]s
    imagePullPolicy: IfNotPresent
    command: [/usr/bin/gpu-kubelet-plugin, mps-client-standin]
    resources: {claims: [{name: gpu}]}
`, name, mpsNS, caps, driverImage(t)))
}

func driverImage(t *testing.T) string {
	ds, err := client.AppsV1().DaemonSets(driverNS).Get(context.Background(), pluginDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Spec.Template.Spec.Containers[0].Image
}

func mpsPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return podIn(t, mpsNS, name)
}

func waitMPSRunning(t *testing.T, names ...string) {
	t.Helper()
	waitRunningIn(t, mpsNS, names...)
}

// mpsDaemon is the one daemon pod of this node and its daemon's host pid.
type mpsDaemon struct {
	pod    types.UID
	name   string
	device string
	pid    int
}

func daemonPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := client.CoreV1().Pods(driverNS).List(context.Background(), metav1.ListOptions{LabelSelector: daemonLabel})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func currentDaemon(t *testing.T) mpsDaemon {
	t.Helper()
	var d mpsDaemon
	waitFor(t, "one running MPS daemon pod with a live pid", 60*time.Second, func() (bool, string) {
		pods := daemonPods(t)
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("%d daemon pods", len(pods))
		}
		p := pods[0]
		d = mpsDaemon{pod: p.UID, name: p.Name, device: p.Annotations["gpu.nvidia.com/mps-device"]}
		data, err := os.ReadFile(filepath.Join(stateDir(), "mps", d.device, "daemon.pid"))
		if err != nil {
			return false, err.Error()
		}
		d.pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", d.pid))
		return err == nil && strings.Contains(string(cmdline), "mps-control-daemon"), fmt.Sprintf("pid %d: %v", d.pid, err)
	})
	return d
}

// checkClientConnected: the client pod never restarted or failed, and its
// daemon's heartbeat, with the daemon's pid, reached it after since.
func checkClientConnected(t *testing.T, name string, d mpsDaemon, since time.Time) {
	t.Helper()
	waitFor(t, name+" hearing its daemon after "+since.Format(time.RFC3339), 30*time.Second, func() (bool, string) {
		p := mpsPod(t, name)
		if p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("client %s: %s, restarts %d; its daemon went away:\n%s", name, p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount, kubectl(t, "logs", "-n", mpsNS, name))
		}
		logs := kubectl(t, "logs", "-n", mpsNS, name, "--tail=3")
		for _, m := range heartbeat.FindAllStringSubmatch(logs, -1) {
			at, _ := time.Parse(time.RFC3339, m[1])
			if m[2] != strconv.Itoa(d.pid) {
				t.Fatalf("client %s hears daemon pid %s, want %d", name, m[2], d.pid)
			}
			if !at.Before(since) {
				return true, ""
			}
		}
		return false, logs
	})
}

func sameDaemon(t *testing.T, before mpsDaemon, after string) {
	t.Helper()
	if now := currentDaemon(t); now != before {
		t.Fatalf("MPS daemon changed across %s: %+v, before %+v", after, now, before)
	}
	for _, p := range daemonPods(t) {
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Fatalf("daemon pod %s restarted across %s", p.Name, after)
		}
	}
}

// waitNewPlugin waits for exactly one ready plugin pod that is none of old.
func waitNewPlugin(t *testing.T, old map[types.UID]bool) {
	t.Helper()
	waitPluginReady(t, "one new ready plugin pod", func(p corev1.Pod) bool { return !old[p.UID] })
}

func pluginPods(t *testing.T) map[types.UID]bool {
	t.Helper()
	out := map[types.UID]bool{}
	for _, p := range pluginPodList(t) {
		out[p.UID] = true
	}
	return out
}

func helm(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("helm", args...).CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func waitNoDaemon(t *testing.T, d mpsDaemon) {
	t.Helper()
	waitFor(t, "the MPS daemon gone", 120*time.Second, func() (bool, string) {
		if n := len(daemonPods(t)); n != 0 {
			return false, fmt.Sprintf("%d daemon pods", n)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", d.pid)); err == nil {
			return false, fmt.Sprintf("pid %d runs", d.pid)
		}
		_, err := os.Stat(filepath.Join(stateDir(), "mps", d.device))
		return os.IsNotExist(err), "daemon directory still there"
	})
}

func mpsNamespace(t *testing.T) {
	t.Helper()
	kubectl(t, "create", "namespace", mpsNS)
	t.Cleanup(func() { _ = exec.Command("kubectl", "delete", "namespace", mpsNS, "--wait=true").Run() })
}

// TestMPSDaemonOutlivesThePlugin: two memory-fraction claims share one GPU
// through one MPS daemon pod, each client seeing its own limits; a third
// that asks for more memory than is left stays Pending. The daemon (same
// pod, same pid) and its clients (still connected) survive a deletion of
// the plugin pod and a helm upgrade that rolls the DaemonSet, and the
// daemon goes with the last claim.
func TestMPSDaemonOutlivesThePlugin(t *testing.T) {
	mpsNamespace(t)
	mpsClaimAndClient(t, "mps-20gi", "20Gi", "")
	mpsClaimAndClient(t, "mps-30gi", "30Gi", "50")
	waitMPSRunning(t, "mps-20gi", "mps-30gi")
	d := currentDaemon(t)
	start := time.Now()
	checkClientConnected(t, "mps-20gi", d, start.Add(-time.Minute))
	a, b := kubectl(t, "logs", "-n", mpsNS, "mps-20gi"), kubectl(t, "logs", "-n", mpsNS, "mps-30gi")
	if !strings.Contains(a, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M") || strings.Contains(a, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") {
		t.Fatalf("20Gi client's MPS environment:\n%s", a)
	}
	if !strings.Contains(b, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=30720M") || !strings.Contains(b, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50") {
		t.Fatalf("30Gi + 50%% client's MPS environment:\n%s", b)
	}
	// 20Gi + 30Gi are taken of the GPU's 80Gi: 40Gi more does not fit.
	mpsClaimAndClient(t, "mps-40gi", "40Gi", "")
	waitFor(t, "a scheduler event saying why the 40Gi share is Pending", 60*time.Second, func() (bool, string) {
		list, err := client.CoreV1().Events(mpsNS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=mps-40gi"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Message, "claim") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
	if p := mpsPod(t, "mps-40gi"); p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
		t.Fatalf("the 40Gi share is %s on %q, want Pending unscheduled", p.Status.Phase, p.Spec.NodeName)
	}
	kubectl(t, "delete", "pod,resourceclaim", "-n", mpsNS, "mps-40gi", "--wait=true")

	// The plugin pod is deleted: the DaemonSet starts a new one.
	old := pluginPods(t)
	kubectl(t, "delete", "pod", "-n", driverNS, "-l", pluginLabel, "--wait=true")
	waitNewPlugin(t, old)
	restarted := time.Now()
	sameDaemon(t, d, "a plugin pod deletion")
	checkClientConnected(t, "mps-20gi", d, restarted)
	checkClientConnected(t, "mps-30gi", d, restarted)

	// helm upgrade with a changed pod template rolls the DaemonSet.
	chart := filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver")
	old = pluginPods(t)
	helm(t, "upgrade", helmRelease, chart, "-n", driverNS, "--reuse-values", "--set", "kubeletPlugin.logVerbosity=3", "--wait", "--timeout", "180s")
	t.Cleanup(func() {
		_ = exec.Command("helm", "upgrade", helmRelease, chart, "-n", driverNS, "--reuse-values", "--set", "kubeletPlugin.logVerbosity=2", "--wait", "--timeout", "180s").Run()
	})
	waitNewPlugin(t, old)
	upgraded := time.Now()
	sameDaemon(t, d, "a helm upgrade")
	checkClientConnected(t, "mps-20gi", d, upgraded)
	checkClientConnected(t, "mps-30gi", d, upgraded)

	// The daemon stays while one claim uses it and goes with the last.
	kubectl(t, "delete", "pod,resourceclaim", "-n", mpsNS, "mps-20gi", "--wait=true")
	time.Sleep(2 * time.Second)
	sameDaemon(t, d, "the first claim's unprepare")
	kubectl(t, "delete", "pod,resourceclaim", "-n", mpsNS, "mps-30gi", "--wait=true")
	waitNoDaemon(t, d)
}

// TestMPSDaemonGoneWhenUnpreparedWhilePluginDown: the last claim of a
// daemon goes while no plugin runs on the node; the daemon keeps running
// until a plugin is back, which then stops it.
func TestMPSDaemonGoneWhenUnpreparedWhilePluginDown(t *testing.T) {
	mpsNamespace(t)
	mpsClaimAndClient(t, "mps-down", "10Gi", "")
	waitMPSRunning(t, "mps-down")
	d := currentDaemon(t)

	// No node matches: the DaemonSet removes its pod.
	kubectl(t, "patch", "daemonset", "-n", driverNS, pluginDS, "--type=merge", "-p", `{"spec":{"template":{"spec":{"nodeSelector":{"gpu-dra-e2e/plugin-down":"true"}}}}}`)
	restore := func() {
		_ = exec.Command("kubectl", "patch", "daemonset", "-n", driverNS, pluginDS, "--type=merge", "-p", `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`).Run()
	}
	t.Cleanup(restore)
	waitFor(t, "no plugin pod", 120*time.Second, func() (bool, string) {
		n := len(pluginPods(t))
		return n == 0, fmt.Sprintf("%d plugin pods", n)
	})
	kubectl(t, "delete", "pod,resourceclaim", "-n", mpsNS, "mps-down", "--wait=false")
	time.Sleep(5 * time.Second)
	sameDaemon(t, d, "the plugin going down")

	old := pluginPods(t)
	restore()
	waitNewPlugin(t, old)
	waitNoDaemon(t, d)
	waitFor(t, "the client pod and its claim gone", 120*time.Second, func() (bool, string) {
		out, _ := exec.Command("kubectl", "get", "pod,resourceclaim", "-n", mpsNS, "-o", "name").CombinedOutput()
		return strings.TrimSpace(string(out)) == "", string(out)
	})
}
