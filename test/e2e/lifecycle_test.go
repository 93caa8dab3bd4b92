// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node's lifecycle: a reboot with claims prepared, and a plugin that
// starts while the API server is away.

const (
	rebootNS    = "gpu-reboot"
	apiDownNS   = "gpu-apiserver-down"
	podCommand  = `nvidia-smi -L; env | grep ^CUDA_MPS | sort; echo e2e-ready; sleep 3600`
	apiDownTime = 60 * time.Second
)

// claimPod is a pod whose containers each use a request of its one claim
// "gpu" (named, or from a template).
func claimPod(name, namespace, template, claim string, containers map[string]string) string {
	ref := "resourceClaimTemplateName: " + template
	if claim != "" {
		ref = "resourceClaimName: " + claim
	}
	names := make([]string, 0, len(containers))
	for n := range containers {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, %s}]
  containers:
`, name, namespace, ref)
	for _, n := range names {
		req := ""
		if r := containers[n]; r != "" {
			req = ", request: " + r
		}
		fmt.Fprintf(&b, `  - name: %s
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, %q]
    resources: {claims: [{name: gpu%s}]}
`, n, podCommand, req)
	}
	return b.String()
}

// workloadPods are the pods of workloadSpecs and their containers: a whole
// GPU, two dynamic MIG devices of one GPU (one per container), a
// time-sliced GPU (Long), an MPS-shared GPU with client limits, and a
// memory fraction of GPU 7 (deploy.sh offers it).
var workloadPods = map[string][]string{
	"whole": {"ctr"}, "mig-pair": {"small", "big"}, "time-sliced": {"ctr"}, "mps": {"ctr"}, "fraction": {"ctr"},
}

// allWorkloads is every pod of workloadPods, in a fixed order.
var allWorkloads = []string{"whole", "mig-pair", "time-sliced", "mps", "fraction"}

// workloadSpecs returns the claims (or templates) and pods of the named
// workloadPods.
func workloadSpecs(namespace string, pods ...string) string {
	docs := map[string][]string{
		"whole": {gpuTemplate("whole", namespace, "!device.allowMultipleAllocations"),
			claimPod("whole", namespace, "whole", "", map[string]string{"ctr": ""})},
		"mig-pair": {fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-pair, namespace: %[1]s}
spec:
  spec:
    devices:
      requests:
      - name: small
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]
      - name: big
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"}}]
      constraints:
      - matchAttribute: gpu.nvidia.com/parentUUID
`, namespace), claimPod("mig-pair", namespace, "mig-pair", "", map[string]string{"small": "small", "big": "big"})},
		"time-sliced": {fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: time-sliced, namespace: %[1]s}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}}
`, namespace), claimPod("time-sliced", namespace, "", "time-sliced", map[string]string{"ctr": ""})},
		"mps": {fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mps, namespace: %[1]s}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 40Gi}}}
`, namespace), claimPod("mps", namespace, "mps", "", map[string]string{"ctr": ""})},
		"fraction": {fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: fraction-20gi, namespace: %[1]s}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          capacity: {requests: {memory: 20Gi}}
          selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]
`, namespace), claimPod("fraction", namespace, "fraction-20gi", "", map[string]string{"ctr": ""})},
	}
	var out []string
	for _, p := range pods {
		out = append(out, docs[p]...)
	}
	return strings.Join(out, "---\n")
}

// seen is what one container saw: its GPU (the parent of a MIG device),
// its MIG devices as profile=UUID, its log and its container ID.
type seen struct {
	gpu, logs, containerID string
	migs                   []string
}

func look(t *testing.T, namespace, pod, container string) seen {
	t.Helper()
	_, gpu, migs := gpuOfIn(t, namespace, pod, container)
	var s seen
	waitFor(t, "the end of "+pod+"/"+container+"'s output", 30*time.Second, func() (bool, string) {
		s = seen{gpu: gpu, migs: migs, logs: kubectlIn(namespace, "logs", pod, "-c", container)}
		return strings.Contains(s.logs, "e2e-ready"), s.logs
	})
	if cs := containerOf(podIn(t, namespace, pod), container); cs != nil {
		s.containerID = cs.ContainerID
	}
	return s
}

func kubectlIn(namespace string, args ...string) string {
	out, _ := exec.Command("kubectl", append([]string{"-n", namespace}, args...)...).CombinedOutput()
	return string(out)
}

// allocatedDevices maps a claim's requests to its allocated devices.
func allocatedDevices(t *testing.T, namespace, claim string) map[string]string {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(namespace).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == driverName {
				out[r.Request] = r.Device
			}
		}
	}
	return out
}

func bootID(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir(), "simulated", "boot_id"))
	if err != nil {
		t.Fatalf("the simulated node's boot ID: %v", err)
	}
	return strings.TrimSpace(string(data))
}

// recordBootIDs maps each claim record's claim UID to the boot ID it names.
func recordBootIDs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range checkpointRecords() {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Claim struct {
				UID    string `json:"uid"`
				BootID string `json:"bootID"`
			} `json:"claim"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[rec.Claim.UID] = rec.Claim.BootID
	}
	return out
}

// buildGpudra builds the operator CLI of this checkout.
func buildGpudra(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpudra")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gpudra")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/gpudra: %v\n%s", err, out)
	}
	return bin
}

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// mpsDaemonFor waits for the running MPS daemon pod of a device and its
// live daemon process, and returns the pod's UID.
func mpsDaemonFor(t *testing.T, uuid string) string {
	t.Helper()
	uid := ""
	waitFor(t, "a running MPS daemon for "+uuid, 120*time.Second, func() (bool, string) {
		for _, p := range daemonPods(t) {
			if p.Annotations["gpu.nvidia.com/mps-device"] != uuid || p.DeletionTimestamp != nil {
				continue
			}
			if p.Status.Phase != corev1.PodRunning {
				return false, "daemon pod " + p.Name + " " + string(p.Status.Phase)
			}
			pid := mpsDaemonPID(uuid)
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil || !strings.Contains(string(cmdline), "mps-control-daemon") {
				return false, fmt.Sprintf("daemon pid %d: %v", pid, err)
			}
			uid = string(p.UID)
			return true, ""
		}
		return false, "no daemon pod"
	})
	return uid
}

func mpsDaemonPID(uuid string) int {
	data, err := os.ReadFile(filepath.Join(stateDir(), "mps", uuid, "daemon.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// TestNodeReboot reboots the node under prepared claims of every kind: the
// kubelet stops, every container is killed, containerd stops, the
// simulated GPUs reboot (MIG devices, MIG mode and time slices gone, a new
// boot ID, /var/run/cdi emptied), and containerd and the kubelet start
// again. The kubelet keeps its own record of prepared claims and does not
// ask the plugin again: the plugin must restore every claim when it starts.
func TestNodeReboot(t *testing.T) {
	requireCleanNode(t)
	gpudra := buildGpudra(t)
	testNamespace(t, rebootNS)
	applyYAML(t, workloadSpecs(rebootNS, allWorkloads...))
	containers, pods := workloadPods, allWorkloads
	waitRunningIn(t, rebootNS, pods...)

	// Before: what each container sees, and what the claims say.
	before := map[string]seen{}
	claims := map[string]string{} // pod -> claim
	for _, p := range pods {
		claims[p] = claimOf(t, rebootNS, p, "gpu")
		for _, c := range containers[p] {
			before[p+"/"+c] = look(t, rebootNS, p, c)
		}
	}
	statusBefore := map[string]map[string]string{}
	for _, p := range pods {
		statusBefore[p] = waitStatusUUIDs(t, rebootNS, claims[p], nil)
	}
	migDevs := allocatedDevices(t, rebootNS, claims["mig-pair"])
	for _, c := range []string{"small", "big"} {
		s := before["mig-pair/"+c]
		if len(s.migs) != 1 {
			t.Fatalf("mig-pair/%s sees MIG devices %v, want one", c, s.migs)
		}
		if _, uuid, _ := strings.Cut(s.migs[0], "="); statusBefore["mig-pair"][migDevs[c]] != uuid {
			got := statusBefore["mig-pair"][migDevs[c]]
			t.Fatalf("claim %s: device status names %s for %s, the container sees %s", claims["mig-pair"], got, migDevs[c], s.migs[0])
		}
	}
	tsGPU := before["time-sliced/ctr"].gpu
	if got := timeSliceOf(tsGPU); got != "Long" {
		t.Fatalf("time slice of %s is %q before the reboot, want Long", tsGPU, got)
	}
	mpsGPU, fracGPU := before["mps/ctr"].gpu, before["fraction/ctr"].gpu
	daemonsBefore := map[string]string{mpsGPU: mpsDaemonFor(t, mpsGPU), fracGPU: mpsDaemonFor(t, fracGPU)}
	plugin := pluginPod(t)
	pluginRestarts, pluginContainer := plugin.Status.ContainerStatuses[0].RestartCount, plugin.Status.ContainerStatuses[0].ContainerID
	profile, node := envOf(plugin.Spec.Containers[0], "SIMULATE_PROFILE"), plugin.Spec.NodeName
	oldBoot := bootID(t)
	for uid, b := range recordBootIDs(t) {
		if b != oldBoot {
			t.Errorf("record of claim %s names boot %q before the reboot, the node's boot is %s", uid, b, oldBoot)
		}
	}
	t.Logf("before the reboot: %d claims prepared (%d records, %d CDI specs), plugin restarts %d, boot %s", len(claims), len(checkpointRecords()), len(cdiSpecs()), pluginRestarts, oldBoot)

	// The reboot.
	rebootAt := time.Now()
	kubelet := stopComponent(t, "kubelet")
	killed := killAllContainers(t)
	containerd := stopComponent(t, "containerd")
	shims := killShims()
	out, err := exec.Command(gpudra, "simulate-reboot", "--simulate", profile, "--node-name", node,
		"--state-dir", stateDir(), "--cdi-root", cdiDir, "--driver-name", driverName).CombinedOutput()
	if err != nil {
		t.Fatalf("gpudra simulate-reboot: %v\n%s", err, out)
	}
	t.Logf("node down: kubelet stopped, %d containers killed, containerd stopped, %d shims killed; gpudra simulate-reboot:\n%s", killed, shims, strings.TrimSpace(string(out)))
	// The reboot took the devices' configuration: nothing configured is left.
	newBoot := bootID(t)
	if newBoot == oldBoot || timeSliceOf(tsGPU) != "Default" || len(cdiSpecs()) != 0 || migInstances(t) != 0 {
		t.Fatalf("after simulate-reboot: boot %s (was %s), time slice %s, %d CDI specs, %d MIG instances; want a new boot and nothing configured",
			newBoot, oldBoot, timeSliceOf(tsGPU), len(cdiSpecs()), migInstances(t))
	}
	containerd.start(t)
	waitFor(t, "containerd to answer", 30*time.Second, func() (bool, string) {
		out, err := exec.Command("ctr", "version").CombinedOutput()
		return err == nil, string(out)
	})
	kubeletStart := kubelet.start(t)
	t.Logf("node up again: kubelet started %.1fs after the reboot began", kubeletStart.Sub(rebootAt).Seconds())

	// Every pod runs again in new containers; the plugin once more.
	var pluginReady time.Duration
	runningAgain := map[string]time.Duration{}
	waitFor(t, "every pod running again in new containers and the plugin ready", 5*time.Minute, func() (bool, string) {
		var waiting []string
		if pluginReady == 0 {
			pods := pluginPodList(t)
			if len(pods) == 1 && len(pods[0].Status.ContainerStatuses) == 1 {
				if cs := pods[0].Status.ContainerStatuses[0]; cs.Ready && cs.ContainerID != pluginContainer {
					pluginReady = time.Since(kubeletStart)
				}
			}
			if pluginReady == 0 {
				waiting = append(waiting, "plugin")
			}
		}
		for _, p := range pods {
			if _, ok := runningAgain[p]; ok {
				continue
			}
			pod, err := client.CoreV1().Pods(rebootNS).Get(context.Background(), p, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			ok := pod.Status.Phase == corev1.PodRunning
			for _, c := range containers[p] {
				cs := containerOf(pod, c)
				ok = ok && cs != nil && cs.State.Running != nil && cs.Ready && cs.ContainerID != before[p+"/"+c].containerID
			}
			if ok {
				runningAgain[p] = time.Since(kubeletStart)
			} else {
				waiting = append(waiting, p)
			}
		}
		return len(waiting) == 0, "waiting for " + strings.Join(waiting, ", ")
	})
	var slowest time.Duration
	var times []string
	for _, p := range pods {
		slowest = max(slowest, runningAgain[p])
		times = append(times, fmt.Sprintf("%s %.1fs", p, runningAgain[p].Seconds()))
	}
	t.Logf("kubelet start -> every pod Running again: %.1fs (%s); plugin Ready after %.1fs", slowest.Seconds(), strings.Join(times, ", "), pluginReady.Seconds())

	// The same devices, configured again.
	after := map[string]seen{}
	for _, p := range pods {
		for _, c := range containers[p] {
			after[p+"/"+c] = look(t, rebootNS, p, c)
		}
	}
	for _, pc := range []string{"whole/ctr", "time-sliced/ctr", "mps/ctr", "fraction/ctr"} {
		if b, a := before[pc], after[pc]; a.gpu != b.gpu || len(a.migs) != 0 {
			t.Errorf("%s sees GPU %s and MIG devices %v after the reboot; before: GPU %s", pc, a.gpu, a.migs, b.gpu)
		}
	}
	migUUIDs := map[string]string{}
	for _, c := range []string{"small", "big"} {
		b, a := before["mig-pair/"+c], after["mig-pair/"+c]
		if len(a.migs) != 1 || a.gpu != b.gpu {
			t.Errorf("mig-pair/%s sees MIG devices %v on GPU %s after the reboot; before: %v on %s", c, a.migs, a.gpu, b.migs, b.gpu)
			continue
		}
		bp, _, _ := strings.Cut(b.migs[0], "=")
		ap, au, _ := strings.Cut(a.migs[0], "=")
		if ap != bp {
			t.Errorf("mig-pair/%s sees a %s MIG device after the reboot, a %s before", c, ap, bp)
		}
		migUUIDs[migDevs[c]] = au
		t.Logf("mig-pair/%s: %s, before the reboot %s", c, a.migs[0], b.migs[0])
	}
	for _, p := range pods {
		want := statusBefore[p]
		if p == "mig-pair" {
			want = migUUIDs
		}
		got := waitStatusUUIDs(t, rebootNS, claims[p], func(got map[string]string) bool {
			for dev, uuid := range want {
				if got[dev] != uuid {
					return false
				}
			}
			return true
		})
		t.Logf("claim %s (pod %s): device status %v", claims[p], p, got)
	}
	if got := timeSliceOf(tsGPU); got != "Long" {
		t.Errorf("time slice of %s is %q after the reboot, want Long", tsGPU, got)
	}
	for pc, env := range map[string][]string{
		"mps/ctr":      {"CUDA_MPS_PIPE_DIRECTORY=", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=40960M"},
		"fraction/ctr": {"CUDA_MPS_PIPE_DIRECTORY=", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M"},
	} {
		for _, e := range env {
			if !strings.Contains(after[pc].logs, e) {
				t.Errorf("%s does not see %s after the reboot:\n%s", pc, e, after[pc].logs)
			}
		}
	}
	for gpu, old := range daemonsBefore {
		uid := mpsDaemonFor(t, gpu)
		t.Logf("MPS daemon of %s: pod %s (before the reboot %s)", gpu, uid, old)
	}
	if n := len(cdiSpecs()); n != len(claims) {
		t.Errorf("%d CDI specs after the reboot, want one per claim (%d): %v", n, len(claims), cdiSpecs())
	}
	for uid, b := range recordBootIDs(t) {
		if b != newBoot {
			t.Errorf("record of claim %s names boot %q after the reboot, want %s", uid, b, newBoot)
		}
	}
	if n := migInstances(t); n != 2 {
		t.Errorf("%d MIG instances after the reboot, want 2", n)
	}

	// The plugin: restarted once by the reboot, and not again by its
	// liveness probe.
	plugin = pluginPod(t)
	if got := plugin.Status.ContainerStatuses[0].RestartCount; got != pluginRestarts+1 {
		t.Errorf("plugin restart count %d after the reboot, %d before: want one restart, the reboot's", got, pluginRestarts)
	}
	stableSince, restarts, id := time.Now(), plugin.Status.ContainerStatuses[0].RestartCount, plugin.Status.ContainerStatuses[0].ContainerID
	for time.Since(stableSince) < 30*time.Second {
		time.Sleep(2 * time.Second)
		cs := pluginPod(t).Status.ContainerStatuses[0]
		if cs.RestartCount != restarts || cs.ContainerID != id || !cs.Ready {
			t.Fatalf("plugin container %.0fs after the reboot's restart: restarts %d (was %d), ready %v, container %s (was %s); last termination %+v\nprevious log:\n%s",
				time.Since(stableSince).Seconds(), cs.RestartCount, restarts, cs.Ready, cs.ContainerID, id, cs.LastTerminationState.Terminated, pluginLogs(t, plugin.Name, true))
		}
	}
	events := eventsSince(t, driverNS, "Pod", plugin.Name, rebootAt)
	var bad []string
	readinessFailures := 0
	for _, e := range events {
		switch {
		case strings.Contains(e, " Killing: "), strings.Contains(e, " Unhealthy: ") && strings.Contains(e, "Liveness"):
			bad = append(bad, e)
		case strings.Contains(e, " Unhealthy: "):
			readinessFailures++
		}
	}
	if len(bad) != 0 {
		t.Errorf("plugin pod %s was probed unhealthy or killed after the reboot:\n  %s", plugin.Name, strings.Join(bad, "\n  "))
	}
	t.Logf("plugin restart count %d -> %d, stable for 30s after Ready; its events since the reboot (%d readiness failures):\n  %s",
		pluginRestarts, restarts, readinessFailures, strings.Join(events, "\n  "))

	// Gone with the claims: nothing of the driver's is left.
	kubectl(t, "delete", "namespace", rebootNS, "--wait=true", "--timeout=180s")
	waitNodeClean(t, "after the rebooted claims were deleted", nil)
}

// klogTime reads the time of a klog line ("I0102 15:04:05.000000 ...").
var klogTime = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)

// TestPluginStartsWithAPIServerDown: with a GPU pod running, the API
// server stops and the plugin's process is killed; the kubelet starts the
// plugin again while the API server stays down for a minute. The plugin
// must come up live (no liveness restart while it cannot reach the API
// server), serve the running pod's claim, and be ready and prepare new
// claims once the API server is back.
func TestPluginStartsWithAPIServerDown(t *testing.T) {
	requireCleanNode(t)
	testNamespace(t, apiDownNS)
	applyYAML(t, gpuTemplate("whole", apiDownNS, "!device.allowMultipleAllocations")+"---\n"+
		claimPod("running", apiDownNS, "whole", "", map[string]string{"ctr": ""}))
	waitRunningIn(t, apiDownNS, "running")
	running := look(t, apiDownNS, "running", "ctr")
	claim := claimOf(t, apiDownNS, "running", "gpu")
	waitStatusUUIDs(t, apiDownNS, claim, nil)
	plugin := pluginPod(t)
	restarts, oldID := plugin.Status.ContainerStatuses[0].RestartCount, strings.TrimPrefix(plugin.Status.ContainerStatuses[0].ContainerID, "containerd://")
	probe := plugin.Spec.Containers[0].LivenessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatal("the plugin has no HTTP liveness probe")
	}
	healthz := fmt.Sprintf("http://%s:%d%s", plugin.Status.PodIP, probe.HTTPGet.Port.IntValue(), probe.HTTPGet.Path)
	oldPID, ok := pluginTasks(t)[oldID]
	if !ok {
		t.Fatalf("no running task for the plugin container %s", oldID)
	}

	apiserver := stopComponent(t, "kube-apiserver")
	down := time.Now()
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("API server stopped; plugin process %d (container %s) killed", oldPID, oldID[:12])

	// While the API server is down: every plugin container the kubelet
	// starts, and when each answered /healthz.
	type start struct {
		id      string
		pid     int
		began   time.Time
		healthy time.Duration
	}
	var starts []*start
	httpClient := &http.Client{Timeout: time.Second}
	for time.Since(down) < apiDownTime {
		for id, pid := range pluginTasks(t) {
			if id == oldID || slices.ContainsFunc(starts, func(s *start) bool { return s.id == id }) {
				continue
			}
			began, err := processStart(pid)
			if err != nil {
				began = time.Now()
			}
			starts = append(starts, &start{id: id, pid: pid, began: began})
		}
		if n := len(starts); n > 0 && starts[n-1].healthy == 0 {
			if resp, err := httpClient.Get(healthz); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					starts[n-1].healthy = time.Since(starts[n-1].began)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range starts {
		t.Logf("plugin container %s (pid %d) started %.1fs after the kill; /healthz 200 %.2fs after its start (0: never while the API server was down)",
			s.id[:12], s.pid, s.began.Sub(killed).Seconds(), s.healthy.Seconds())
	}
	if len(starts) != 1 {
		t.Errorf("the kubelet started %d plugin containers in the %s the API server was down, want exactly 1 (the restart after the kill)", len(starts), apiDownTime)
	} else if starts[0].healthy == 0 {
		t.Errorf("the restarted plugin never answered %s with 200 while the API server was down", healthz)
	}
	if p := pluginTasks(t); len(p) != 1 {
		t.Errorf("%d plugin processes run at the end of the outage, want 1: %v", len(p), p)
	}

	apiStart := apiserver.start(t)
	waitFor(t, "the API server ready", 120*time.Second, func() (bool, string) {
		b, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil, string(b)
	})
	t.Logf("API server was down %.1fs, ready %.1fs after its start", apiStart.Sub(down).Seconds(), time.Since(apiStart).Seconds())
	readyFrom := time.Now()
	waitPluginReady(t, "the restarted plugin Ready", func(p corev1.Pod) bool {
		return strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://") != oldID
	})
	t.Logf("plugin Ready %.1fs after the API server was", time.Since(readyFrom).Seconds())
	plugin = pluginPod(t)
	cs := plugin.Status.ContainerStatuses[0]
	if cs.RestartCount != restarts+1 || (len(starts) > 0 && strings.TrimPrefix(cs.ContainerID, "containerd://") != starts[len(starts)-1].id) {
		t.Errorf("plugin restart count %d (was %d), container %s: want exactly one restart, the kill's", cs.RestartCount, restarts, cs.ContainerID)
	}
	logs := pluginLogs(t, plugin.Name, false)
	var first, serving time.Time
	for _, line := range strings.Split(logs, "\n") {
		m := klogTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse("0102 15:04:05.000000", m[1])
		if err != nil {
			continue
		}
		if first.IsZero() {
			first = at
		}
		if serving.IsZero() && strings.Contains(line, "Serving metrics and liveness") {
			serving = at
		}
	}
	if !serving.IsZero() {
		t.Logf("plugin log: /healthz served %.3fs after its first log line", serving.Sub(first).Seconds())
	} else {
		t.Logf("plugin log has no \"Serving metrics and liveness\" line:\n%s", logs)
	}

	// The running pod kept its GPU; a new claim is prepared.
	p := podIn(t, apiDownNS, "running")
	if cs := containerOf(p, "ctr"); p.Status.Phase != corev1.PodRunning || cs == nil || cs.ContainerID != running.containerID || cs.RestartCount != 0 {
		t.Errorf("pod running after the outage: %s, container %+v; want the same container running", p.Status.Phase, cs)
	}
	if _, uuid, _ := gpuOfIn(t, apiDownNS, "running", "ctr"); uuid != running.gpu {
		t.Errorf("pod running sees %s after the outage, %s before", uuid, running.gpu)
	}
	c, err := client.ResourceV1().ResourceClaims(apiDownNS).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cdiDir, "k8s."+driverName+"-claim_"+string(c.UID)+".json")); err != nil {
		t.Errorf("the running pod's claim lost its CDI spec: %v (specs: %v)", err, cdiSpecs())
	}
	if _, err := os.Stat(filepath.Join(stateDir(), "checkpoint", string(c.UID)+".json")); err != nil {
		t.Errorf("the running pod's claim lost its checkpoint record: %v", err)
	}
	applyYAML(t, claimPod("new", apiDownNS, "whole", "", map[string]string{"ctr": ""}))
	created := time.Now()
	waitRunningIn(t, apiDownNS, "new")
	fresh := look(t, apiDownNS, "new", "ctr")
	if fresh.gpu == "" || fresh.gpu == running.gpu {
		t.Errorf("the new pod sees GPU %q; the running pod has %s", fresh.gpu, running.gpu)
	}
	waitStatusUUIDs(t, apiDownNS, claimOf(t, apiDownNS, "new", "gpu"), func(m map[string]string) bool {
		for _, u := range m {
			return u == fresh.gpu
		}
		return false
	})
	// Where the time went: the resourceclaim controller (kube-controller-manager)
	// makes the claim, the scheduler allocates it and binds the pod, the
	// kubelet has the plugin prepare it. The control plane's informers may
	// still be backing off after the outage.
	np := podIn(t, apiDownNS, "new")
	nc, err := client.ResourceV1().ResourceClaims(apiDownNS).Get(context.Background(), claimOf(t, apiDownNS, "new", "gpu"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var scheduled time.Time
	for _, c := range np.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			scheduled = c.LastTransitionTime.Time
		}
	}
	t.Logf("a new pod with a GPU claim ran %.1fs after its creation (GPU %s): claim made +%.0fs, pod scheduled +%.0fs (API times, 1 s resolution)",
		time.Since(created).Seconds(), fresh.gpu, nc.CreationTimestamp.Sub(np.CreationTimestamp.Time).Seconds(), scheduled.Sub(np.CreationTimestamp.Time).Seconds())
	if ev := eventsSince(t, driverNS, "Pod", plugin.Name, down); len(ev) != 0 {
		t.Logf("plugin pod events since the outage:\n  %s", strings.Join(ev, "\n  "))
		for _, e := range ev {
			if strings.Contains(e, " Killing: ") {
				t.Errorf("plugin pod event: %s", e)
			}
		}
	}
	// A liveness probe can reach the killed process before the kubelet
	// sees it exit ("connection refused" in the kill's second): that is
	// this test's SIGKILL, not a probe failing on the plugin. Only the
	// container started after the kill must never fail one (its events
	// from the second after its start on; event times have a resolution
	// of a second).
	if len(starts) == 1 {
		for _, e := range eventsSince(t, driverNS, "Pod", plugin.Name, starts[0].began.Add(time.Second)) {
			if strings.Contains(e, " Unhealthy: ") && strings.Contains(e, "Liveness") {
				t.Errorf("plugin pod event after the restarted container began: %s", e)
			}
		}
	}
	if got := pluginPod(t).Status.ContainerStatuses[0].RestartCount; got != restarts+1 {
		t.Errorf("plugin restart count %d at the end, %d before the kill", got, restarts)
	}
	kubectl(t, "delete", "namespace", apiDownNS, "--wait=true", "--timeout=180s")
	waitNodeClean(t, "after the outage test's pods and claims were deleted", nil)
}
