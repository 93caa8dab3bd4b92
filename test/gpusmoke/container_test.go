// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package gpusmoke

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
)

// TestGPUSmokeContainerWithoutAGPU runs make gpu-smoke's container step
// (step 4) as far as a host without a GPU allows: everything real but the
// GPUs (NVML simulated). The driver root is NVIDIA's R535 userspace in the
// host layout (hack/nvidia-userspace.sh; libcuda in nvidia/current/, which
// the loader does not search by default) with character devices of
// NVIDIA's numbers for two GPUs; nvidia-cdi-hook is the pinned toolkit's;
// runc and the rootfs come from hack/smoke-container.sh. In the container
// the probe must see GPU 0's node and not GPU 1's, load libcuda through
// the hook's ld cache and get cuInit 100 (no device behind the nodes).
//
// Then the MPS claim: NVIDIA's own nvidia-cuda-mps-control (R535, from
// the same userspace) runs chrooted into the driver root, which gets
// Debian's libc from the container's rootfs for it (a host's root has
// one), and two containers at once reach it through the pipe directory
// with the claim's 2048 MiB limit; their cuInit gives 805, the code R535
// gives an MPS client whose server cannot start for want of a GPU.
func TestGPUSmokeContainerWithoutAGPU(t *testing.T) {
	nv := os.Getenv("GDRA_NVIDIA_HOST_ROOT")
	if nv == "" {
		t.Skip("GDRA_NVIDIA_HOST_ROOT unset: run make test, or set it to $(hack/nvidia-userspace.sh --print-root host)")
	}
	if os.Geteuid() != 0 {
		t.Skip("runc and the device nodes need root")
	}
	start := time.Now()
	root := filepath.Join(t.TempDir(), "driver")
	if out, err := exec.Command("cp", "-a", nv, root).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", nv, err, out)
	}
	(&cditest.DriverRoot{GPUs: 2}).MakeDevices(t, filepath.Join(root, "dev"))
	withLibc(t, root)

	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "nvidia-smi.log")
	h := host{log: log, root: root, env: append(os.Environ(),
		"GPU_SMOKE_PLUGIN="+build(t, "./cmd/gpu-kubelet-plugin"), "GPU_SMOKE_GPUDRA="+build(t, "./cmd/gpudra"),
		"GPU_SMOKE_HOOK="+buildHook(t), "GPU_SMOKE_NVIDIA_SMI="+fakeSmi(t, bin, log, ""), "GPU_SMOKE_DRIVER_ROOT="+root,
		"GPU_SMOKE_PLUGIN_ARGS=--simulate h100x2", "GPU_SMOKE_PREPARE_ARGS=--simulate h100x2",
		// No PyTorch: the MPS step is skipped; this test is about step 4.
		"GPU_SMOKE_PYTHON=/bin/false",
	)}
	out, err := h.run(t)
	t.Log("\n" + out)
	if err != nil {
		t.Fatalf("gpu-smoke failed: %v", err)
	}
	for _, want := range []struct{ status, check, detail string }{
		{"PASS", "container: prepare", ""},
		{"PASS", "container: runc run", ""},
		// Only GPU 0's node (195:0), not GPU 1's, and the control nodes.
		{"PASS", "container: device nodes", "saw [/dev/nvidia-modeset 195:254 /dev/nvidia-uvm 511:0 /dev/nvidia-uvm-tools 511:1 /dev/nvidia0 195:0 /dev/nvidiactl 195:255]"},
		// The host layout's directory: found only through the ld cache.
		{"PASS", "container: libcuda via the hook's ld cache", `ld.so.cache names /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1; dlopen("libcuda.so.1") loaded /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1`},
		{"PASS", "container: cuInit", "cuInit 100 CUDA_ERROR_NO_DEVICE"},
		{"SKIP", "container: GPU UUID and CUDA kernel", "skipped: no GPU"},
		{"PASS", "container: unprepare", ""},
		{"PASS", "container: MPS prepare", ""},
		{"PASS", "container: MPS daemon started", "nvidia-cuda-mps-control pid "},
		{"PASS", "container: MPS client 1: runc run", ""},
		{"PASS", "container: MPS client 1: pipe directory and limit", "CUDA_MPS_PIPE_DIRECTORY /tmp/nvidia-mps (control: socket), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT 0=2048M"},
		{"PASS", "container: MPS client 1: libcuda via the hook's ld cache", ""},
		{"PASS", "container: MPS client 1: cuInit", "cuInit 805 CUDA_ERROR_MPS_CONNECTION_FAILED"},
		{"SKIP", "container: MPS client 1: allocations under and over the limit", "skipped: no GPU"},
		{"PASS", "container: MPS client 2: pipe directory and limit", "CUDA_MPS_PIPE_DIRECTORY /tmp/nvidia-mps (control: socket), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT 0=2048M"},
		{"PASS", "container: MPS client 2: cuInit", "cuInit 805 CUDA_ERROR_MPS_CONNECTION_FAILED"},
		{"PASS", "container: MPS clients reached the daemon", ""},
		{"PASS", "container: MPS unprepare", ""},
		{"PASS", "container: MPS daemon directory removed", ""},
		{"PASS", "container: MPS daemon stopped with quit", "exit 0, "},
		{"PASS", "container: no GPU setting changed", ""},
		{"PASS", "hook knows the spec's subcommands", ""},
		{"PASS", "GPU settings unchanged (nvidia-smi)", ""},
	} {
		detail, ok := tableRow(out, want.status, want.check)
		if !ok || !strings.HasPrefix(detail, want.detail) {
			t.Errorf("no row %s %q with detail %q", want.status, want.check, want.detail)
		}
	}
	if !strings.Contains(out, " 0 failed") {
		t.Error("a check failed")
	}
	if detail, _ := tableRow(out, "PASS", "container: MPS daemon stopped with quit"); !strings.Contains(detail, "logged Cmd:quit: true, processes left in the daemon's mount namespace: [];") {
		t.Errorf("MPS daemon stop: %q", detail)
	}
	// The daemon's mounts were its own: the driver root's /tmp and
	// /dev/shm are as empty as before.
	for _, dir := range []string{"tmp", "dev/shm"} {
		if left, _ := os.ReadDir(filepath.Join(root, dir)); len(left) != 0 {
			t.Errorf("driver root's /%s holds %d entries after the run", dir, len(left))
		}
	}
	h.readOnly(t)
	t.Logf("gpu-smoke with the container step: %.1fs", time.Since(start).Seconds())
}

// withLibc gives the driver root Debian's libc from the smoke container's
// rootfs, as a host's root has (NVIDIA's MPS tools are linked against it),
// and the empty /tmp and /dev/shm a host's root has, where the MPS daemon
// gets its directories mounted.
func withLibc(t *testing.T, root string) {
	t.Helper()
	out, err := exec.Command("../../hack/smoke-container.sh").Output()
	if err != nil {
		t.Fatalf("hack/smoke-container.sh: %v", err)
	}
	var rootfs string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "rootfs" {
			rootfs = f[1]
		}
	}
	if rootfs == "" {
		t.Fatalf("hack/smoke-container.sh printed no rootfs line:\n%s", out)
	}
	// Debian 12's libc6 puts the loader and libc in /lib/x86_64-linux-gnu
	// and the loader's link in /lib64; NVIDIA's packages put nothing there.
	for _, dir := range []string{"lib", "lib64"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("cp", "-a", filepath.Join(rootfs, dir)+"/.", filepath.Join(root, dir)).CombinedOutput(); err != nil {
			t.Fatalf("copy %s's /%s: %v\n%s", rootfs, dir, err, b)
		}
	}
	for _, dir := range []string{"tmp", "dev/shm"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// buildHook builds nvidia-cdi-hook of the toolkit version go.mod pins, as
// make build does.
func buildHook(t *testing.T) string {
	t.Helper()
	if out, ok := built["nvidia-cdi-hook"]; ok {
		return out
	}
	v, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/NVIDIA/nvidia-container-toolkit").Output()
	if err != nil {
		t.Fatalf("go list the toolkit's version: %v", err)
	}
	cmd := exec.Command("go", "install", "-trimpath", "-ldflags", "-s -w",
		"github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@"+strings.TrimSpace(string(v)))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOBIN="+binDir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install nvidia-cdi-hook: %v\n%s", err, b)
	}
	built["nvidia-cdi-hook"] = filepath.Join(binDir, "nvidia-cdi-hook")
	return built["nvidia-cdi-hook"]
}

// tableRow finds the row of a check in gpu-smoke's table and returns its
// detail.
func tableRow(out, status, check string) (string, bool) {
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, fmt.Sprintf("%-6s %s ", status, check)); ok {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}
