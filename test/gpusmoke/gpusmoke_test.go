// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package gpusmoke runs hack/gpu-smoke.sh on a fake GPU host: the real
// plugin and gpudra binaries (NVML simulated, everything else real: nvcdi
// under a fake driver root with device nodes and libraries, the plugin's
// kubelet socket, the CDI library), an nvidia-smi stand-in that answers the
// queries the script makes and logs every call, and an nvidia-cdi-hook
// stand-in.
package gpusmoke

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const script = "../../hack/gpu-smoke.sh"

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpusmoke-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var built = map[string]string{}

// build builds a command of this repository once per test binary.
func build(t *testing.T, pkg string) string {
	t.Helper()
	if out, ok := built[pkg]; ok {
		return out
	}
	out := filepath.Join(binDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", out, pkg)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	built[pkg] = out
	return out
}

// fakeSmi writes an nvidia-smi stand-in for the simulated node: its GPU
// list (memory of GPU 1 replaced when memGPU1 is set), no MIG table, fixed
// settings; every call is appended to log.
func fakeSmi(t *testing.T, dir, log, memGPU1 string) string {
	t.Helper()
	_, inv, err := simulate.Discover("h100x2", "gpu-smoke", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var csv []string
	for _, g := range inv.GPUs {
		mem := fmt.Sprint(g.MemoryBytes >> 20)
		if g.Index == 1 && memGPU1 != "" {
			mem = memGPU1
		}
		csv = append(csv, fmt.Sprintf("%d, %s, %s, %s, 0000%s, %s", g.Index, g.UUID, g.ProductName, mem, strings.ToUpper(g.PCIBusID), inv.DriverVersion))
	}
	smi := filepath.Join(dir, "nvidia-smi")
	body := fmt.Sprintf(`#!/bin/sh
echo "$*" >> %q
case "$*" in
  --query-gpu=index,uuid,name,memory.total,pci.bus_id,driver_version*) printf '%%s\n' %s ;;
  --query-gpu=index,uuid,mig.mode.current*) echo "0, x, Disabled, Disabled, Default, Enabled, 1980 MHz, 2619 MHz, 700.00 W"; echo "1, y, Disabled, Disabled, Default, Enabled, 1980 MHz, 2619 MHz, 700.00 W" ;;
  "mig -lgip") echo "No MIG-enabled devices found."; exit 6 ;;
  "compute-policy -l") echo "GPU 0: Timeslice Default" ;;
  *) echo "stand-in: unexpected call: $*" >&2; exit 2 ;;
esac
`, log, shellQuoteAll(csv))
	if err := os.WriteFile(smi, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return smi
}

func shellQuoteAll(lines []string) string {
	var q []string
	for _, l := range lines {
		q = append(q, "'"+strings.ReplaceAll(l, "'", `'\''`)+"'")
	}
	return strings.Join(q, " ")
}

type host struct {
	env  []string
	log  string
	root string
}

func newHost(t *testing.T, memGPU1 string) host {
	t.Helper()
	bin := t.TempDir()
	plugin := build(t, "./cmd/gpu-kubelet-plugin")
	gpudra := build(t, "./cmd/gpudra")
	root := cditest.NewDriverRoot(t, simulate.DriverVersion, 2, true)
	hook := filepath.Join(bin, "nvidia-cdi-hook")
	cditest.WriteHookStandIn(t, hook, cditest.HookSubcommands)
	log := filepath.Join(t.TempDir(), "nvidia-smi.log")
	smi := fakeSmi(t, bin, log, memGPU1)
	python := fakeMPS(t, root.Dir, bin)
	return host{log: log, root: root.Dir, env: append(os.Environ(),
		"GPU_SMOKE_PYTHON="+python,
		"GPU_SMOKE_PLUGIN="+plugin, "GPU_SMOKE_GPUDRA="+gpudra, "GPU_SMOKE_HOOK="+hook,
		"GPU_SMOKE_NVIDIA_SMI="+smi, "GPU_SMOKE_DRIVER_ROOT="+root.Dir,
		"GPU_SMOKE_PLUGIN_ARGS=--simulate h100x2", "GPU_SMOKE_PREPARE_ARGS=--simulate h100x2",
		// The stand-in libraries load in no container: container_test.go
		// runs that step over NVIDIA's userspace.
		"GPU_SMOKE_CONTAINER=skip",
	)}
}

func (h host) run(t *testing.T) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", script)
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// readOnly checks that nvidia-smi was only queried.
func (h host) readOnly(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(h.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !strings.HasPrefix(call, "--query-gpu=") && call != "mig -lgip" && call != "compute-policy -l" {
			t.Errorf("nvidia-smi called with %q: not a query", call)
		}
	}
}

func TestGPUSmokeOnAFakeHost(t *testing.T) {
	h := newHost(t, "")
	out, err := h.run(t)
	t.Log("\n" + out)
	if err != nil {
		t.Fatalf("gpu-smoke failed: %v", err)
	}
	for _, want := range []string{
		"PASS   plugin --print-slices", "GPU 1 memory", "GPU 0 PCI bus ID", "GPU 0 driver version",
		"SKIP   MIG profiles", "CDI hooks name the installed hook", "hook knows the spec's subcommands",
		"CDI spec applies", "no GPU setting changed", "SKIP   container", "GPU settings unchanged (nvidia-smi)", " 0 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "FAIL ") {
		t.Error("a check failed")
	}
	h.readOnly(t)
	h.checkMPS(t, out)
}

func TestGPUSmokeFailsOnAMismatch(t *testing.T) {
	h := newHost(t, "40960")
	out, err := h.run(t)
	t.Log("\n" + out)
	if err == nil {
		t.Fatal("gpu-smoke passed although nvidia-smi reports other memory for GPU 1")
	}
	if !strings.Contains(out, "FAIL   GPU 1 memory") || !strings.Contains(out, "1 failed") {
		t.Error("the table does not show the memory mismatch as the one failure")
	}
	h.readOnly(t)
}

func TestGPUSmokeScriptPassesShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Skip("shellcheck not installed (apt-get install -y shellcheck)")
	}
	if out, err := exec.Command(sc, script).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}
