// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestNodeUserspace deploys the devices node mode (only the GPUs
// simulated; NVIDIA's R535 userspace, nvcdi, nvidia-cdi-hook, device nodes
// and the MPS control daemon real) and runs cudaprobe (test/e2e/probe) in
// pods with a whole GPU, two dynamic MIG devices, a time-sliced GPU, an
// MPS share with limits and a memory fraction. The files node mode comes
// back at the end.
const userspaceNS = "gpu-userspace"

// deployDevicesMode deploys this checkout in the devices node mode and
// returns the driver root it mounts.
func deployDevicesMode(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "deploy.sh"), "h100x8")
	cmd.Env = append(os.Environ(), "NODE_MODE=devices")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		// Helm patches a failed release's objects against the last good
		// revision, which would keep this one's plugin pod template: the
		// files mode deploy must create the DaemonSet afresh.
		_ = exec.Command("kubectl", "delete", "daemonset", "-n", driverNS, pluginDS, "--wait=true").Run()
		t.Fatalf("NODE_MODE=devices deploy.sh: %v\n%s", err, out)
	}
	t.Logf("deploy.sh in the devices node mode took %.1fs", time.Since(start).Seconds())
	waitPluginReady(t, "a ready plugin pod in the devices node mode", func(p corev1.Pod) bool {
		return envOf(p.Spec.Containers[0], "SIMULATE_NODE_MODE") == "devices"
	})
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "driver-root.sh")).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func userspaceSpecs(ns string) string {
	cfg := func(sharing string) string {
		return `
      config:
      - requests: [gpu]
        opaque:
          driver: gpu.nvidia.com
          parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: ` + sharing + `}`
	}
	tmpl := func(name, requests, extra string) string {
		return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: %s, namespace: %s}
spec:
  spec:
    devices:
      requests:%s%s
---
`, name, ns, requests, extra)
	}
	whole := `
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]}`
	mig := `
      - name: a
        exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}
      - name: b
        exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]}
      constraints:
      - matchAttribute: gpu.nvidia.com/parentUUID`
	fraction := `
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          capacity: {requests: {memory: 16Gi}}
          selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]`
	pod := func(name string, containers ...string) string {
		s := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: %[1]s}]
  containers:`, name, ns)
		for _, c := range containers {
			req := ""
			if c != "probe" {
				req = ", request: " + c
			}
			s += fmt.Sprintf(`
  - {name: %s, image: localhost/cudaprobe:e2e, imagePullPolicy: Never, args: [--wait], resources: {claims: [{name: gpu%s}]}}`, c, req)
		}
		return s + "\n---\n"
	}
	return tmpl("whole", whole, "") + pod("whole", "probe") +
		tmpl("mig", mig, "") + pod("mig", "a", "b") +
		tmpl("timesliced", whole, cfg("{strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}")) + pod("timesliced", "probe") +
		tmpl("mps", whole, cfg("{strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 25, defaultPinnedDeviceMemoryLimit: 20Gi}}")) + pod("mps", "probe") +
		tmpl("fraction", fraction, "") + pod("fraction", "probe")
}

// probeOf waits for a container's complete probe output.
func probeOf(t *testing.T, podName, container string) probeOut {
	t.Helper()
	var p probeOut
	waitFor(t, "cudaprobe output of "+podName+"/"+container, 60*time.Second, func() (bool, string) {
		out, err := exec.Command("kubectl", "logs", "-n", userspaceNS, podName, "-c", container).CombinedOutput()
		p = parseProbe(string(out))
		return err == nil && p.complete, string(out)
	})
	return p
}

// gpuMinors maps the node's GPU UUIDs to minor numbers, from the slices.
func gpuMinors(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, s := range completePool(t) {
		for _, d := range s.Spec.Devices {
			u, m := d.Attributes["uuid"], d.Attributes["minor"]
			if u.StringValue != nil && m.IntValue != nil {
				out[*u.StringValue] = int(*m.IntValue)
			}
		}
	}
	return out
}

// capOfGPU: a capability minor is one of the nvidia-caps minors of a GPU's MIG instances (the
// simulator's table, as the driver's /proc/driver/nvidia-caps/mig-minors).
func capOfGPU(capMinor, gpuMinor int) bool {
	return capMinor >= 3+gpuMinor*135 && capMinor < 3+(gpuMinor+1)*135
}

func TestNodeUserspace(t *testing.T) {
	requireCleanNode(t)
	t.Cleanup(func() { deployProfile(t, "h100x8") })
	root := deployDevicesMode(t)
	testNamespace(t, userspaceNS)
	applyYAML(t, userspaceSpecs(userspaceNS))
	pods := map[string][]string{"whole": {"probe"}, "mig": {"a", "b"}, "timesliced": {"probe"}, "mps": {"probe"}, "fraction": {"probe"}}
	names := []string{"whole", "mig", "timesliced", "mps", "fraction"}
	waitRunningIn(t, userspaceNS, names...)
	minors := gpuMinors(t)
	devRoot := filepath.Join(stateDir(), "simulated", "devroot", "dev")

	for _, name := range names {
		claim := claimOf(t, userspaceNS, name, "gpu")
		uuids := waitStatusUUIDs(t, userspaceNS, claim, nil)
		want := map[int]bool{}
		mig := false
		for _, u := range uuids {
			if strings.HasPrefix(u, "MIG-") {
				mig = true
				continue
			}
			want[minors[u]] = true
		}
		if mig { // the parent of both MIG devices: the GPU whose caps exist
			caps, _ := filepath.Glob(filepath.Join(devRoot, "nvidia-caps", "nvidia-cap*"))
			for m := range minors {
				for _, c := range caps {
					n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(c), "nvidia-cap"))
					if capOfGPU(n, minors[m]) {
						want[minors[m]] = true
					}
				}
			}
		}
		if name == "timesliced" {
			for _, u := range uuids {
				if v := timeSliceOf(u); v != "Long" {
					t.Errorf("timesliced: the simulator's time slice of %s is %s, want Long", u, v)
				}
			}
		}
		seenCaps := map[string]string{}
		for _, c := range pods[name] {
			p := probeOf(t, name, c)
			t.Logf("%s/%s:\n%s", name, c, strings.TrimSpace(p.raw))
			for _, b := range checkLibs(p, root) {
				t.Errorf("%s/%s: %s", name, c, b)
			}
			if p.version != "0 12020" {
				t.Errorf("%s/%s: cuDriverGetVersion %q, want CUDA_SUCCESS 12020", name, c, p.version)
			}
			wantInit := "100" // CUDA_ERROR_NO_DEVICE: no kernel driver answers
			if name == "mps" || name == "fraction" {
				wantInit = "805" // CUDA_ERROR_MPS_CONNECTION_FAILED: the server found no GPU
			}
			if p.cuInit != wantInit {
				t.Errorf("%s/%s: cuInit %s, want %s (MPS pipe %s)", name, c, p.cuInit, wantInit, p.mps)
			}
			checkDevs(t, name+"/"+c, p, want, mig, devRoot)
			for path := range p.devs {
				if other, ok := seenCaps[path]; ok && strings.Contains(path, "nvidia-caps/") {
					t.Errorf("%s/%s and %s both hold %s", name, c, other, path)
				}
				seenCaps[path] = c
			}
		}
	}
	checkMPSDaemons(t)

	kubectl(t, "delete", "namespace", userspaceNS, "--wait=true", "--timeout=180s")
	waitNodeClean(t, "after the userspace pods", nil)
	caps, _ := filepath.Glob(filepath.Join(devRoot, "nvidia-caps", "nvidia-cap*"))
	for _, c := range caps {
		if b := filepath.Base(c); b != "nvidia-cap1" && b != "nvidia-cap2" {
			t.Errorf("MIG capability node %s left after its MIG device went", c)
		}
	}
}

// checkDevs: the container has character devices for exactly its GPUs
// (and, for MIG, its instances' capabilities), with NVIDIA's numbers.
func checkDevs(t *testing.T, who string, p probeOut, gpus map[int]bool, mig bool, devRoot string) {
	t.Helper()
	if len(p.nonDevs) != 0 {
		t.Errorf("%s: %v are not character devices", who, p.nonDevs)
	}
	var got []int
	caps := 0
	for path, mm := range p.devs {
		name := strings.TrimPrefix(path, "/dev/")
		switch {
		case name == "nvidiactl":
			if mm != "195:255" {
				t.Errorf("%s: /dev/nvidiactl is %s", who, mm)
			}
		case strings.HasPrefix(name, "nvidia-uvm"):
		case strings.HasPrefix(name, "nvidia-caps/nvidia-cap"):
			caps++
			n, _ := strconv.Atoi(strings.TrimPrefix(name, "nvidia-caps/nvidia-cap"))
			owned := false
			for g := range gpus {
				owned = owned || capOfGPU(n, g)
			}
			if !mig || !owned {
				t.Errorf("%s: holds %s (%s), a capability not its own", who, path, mm)
			}
			if _, err := os.Stat(filepath.Join(devRoot, name)); err != nil {
				t.Errorf("%s: %s has no node on the node: %v", who, path, err)
			}
		default:
			n, err := strconv.Atoi(strings.TrimPrefix(name, "nvidia"))
			if err != nil {
				continue // nvidia-modeset and the like
			}
			if mm != fmt.Sprintf("195:%d", n) {
				t.Errorf("%s: %s is %s", who, path, mm)
			}
			got = append(got, n)
		}
	}
	var want []int
	for g := range gpus {
		want = append(want, g)
	}
	sort.Ints(got)
	sort.Ints(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: /dev/nvidia<N> for GPUs %v, want exactly %v", who, got, want)
	}
	if _, ok := p.devs["/dev/nvidiactl"]; !ok {
		t.Errorf("%s: no /dev/nvidiactl", who)
	}
	if mig && caps != 2 {
		t.Errorf("%s: %d MIG capability nodes, want its GPU instance's and compute instance's", who, caps)
	}
}

// checkMPSDaemons: each MPS client's daemon is NVIDIA's, started a server
// for that client (by its host PID), and reports the claim's limits.
func checkMPSDaemons(t *testing.T) {
	t.Helper()
	want := map[string][2]string{"mps": {"25.0", "20G"}, "fraction": {"", "16G"}}
	for name, limits := range want {
		claim := claimOf(t, userspaceNS, name, "gpu")
		var uuid string
		for _, u := range waitStatusUUIDs(t, userspaceNS, claim, nil) {
			uuid = u
		}
		daemon := ""
		for _, d := range daemonPods(t) {
			if d.Annotations["gpu.nvidia.com/mps-device"] == uuid {
				daemon = d.Name
			}
		}
		if daemon == "" {
			t.Errorf("%s: no MPS daemon pod for %s", name, uuid)
			continue
		}
		pid := clientPID(t, podIn(t, userspaceNS, name))
		waitFor(t, "daemon "+daemon+" starting a server for client "+strconv.Itoa(pid), 30*time.Second, func() (bool, string) {
			logs := kubectl(t, "logs", "-n", driverNS, daemon)
			return strings.Contains(logs, fmt.Sprintf("NEW CLIENT %d from user 0", pid)) && strings.Contains(logs, "Starting new server"), logs
		})
		// The daemon program logs the daemon's answers to its
		// get_default_* queries once it set the claim's limits.
		logs := kubectl(t, "logs", "-n", driverNS, daemon)
		for i, q := range []string{"get_default_active_thread_percentage", "get_default_device_pinned_mem_limit 0"} {
			got := ""
			for _, line := range strings.Split(logs, "\n") {
				if a, ok := strings.CutPrefix(line, q+": "); ok {
					got = strings.TrimSpace(a)
				}
			}
			t.Logf("%s: daemon of %s answers %q: %q", name, uuid, q, got)
			if got == "" || (limits[i] != "" && got != limits[i]) {
				t.Errorf("%s: %s: %q, want %q", name, q, got, limits[i])
			}
		}
	}
}

// clientPID is the host PID of the pod's cudaprobe.
func clientPID(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	return probePIDs(t, p)[0]
}

// probePIDs are the host PIDs of the pod's cudaprobe processes, one per
// container.
func probePIDs(t *testing.T, p *corev1.Pod) []int {
	t.Helper()
	var out []int
	cgroups, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	for _, c := range cgroups {
		data, err := os.ReadFile(c)
		if err != nil || !strings.Contains(string(data), string(p.UID)) && !strings.Contains(string(data), strings.ReplaceAll(string(p.UID), "-", "_")) {
			continue
		}
		dir := filepath.Dir(c)
		if cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline")); strings.HasPrefix(string(cmd), "/bin/cudaprobe") {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			out = append(out, pid)
		}
	}
	if len(out) != len(p.Spec.Containers) {
		t.Fatalf("pod %s: %d cudaprobe processes on the host, want one per container (%d)", p.Name, len(out), len(p.Spec.Containers))
	}
	return out
}
