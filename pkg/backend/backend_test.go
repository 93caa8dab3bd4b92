// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func writeExecutable(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestOpenSimulatedNode(t *testing.T) {
	state := t.TempDir()
	stub := filepath.Join(t.TempDir(), "nvidia-smi-sim")
	writeExecutable(t, stub, "#!/bin/sh\necho simulated\n")

	b, err := Open(Options{SimulateProfile: "a30x3", NodeName: "node-a", StateDir: state, NvidiaSmiStub: stub})
	if err != nil {
		t.Fatal(err)
	}
	if b.Simulator == nil || b.NVML != b.Simulator {
		t.Fatalf("simulated backend: NVML %T, Simulator %v; want the simulator as NVML", b.NVML, b.Simulator)
	}
	if got := len(b.Inventory.GPUs); got != 3 {
		t.Errorf("inventory of %d GPUs, want the profile's 3", got)
	}
	// The simulator's files live under the state directory (a host path).
	if want := filepath.Join(state, "simulated"); b.Simulator.Dir != want {
		t.Errorf("simulator dir %s, want %s", b.Simulator.Dir, want)
	}
	edits, ok := b.Edits.(cdi.SimulatedEdits)
	if !ok {
		t.Fatalf("edits %T, want cdi.SimulatedEdits", b.Edits)
	}
	if edits.ControlDevicePath != b.Simulator.ControlDevicePath() || edits.DevicePath(2) != b.Simulator.DevicePath(2) {
		t.Errorf("edits name %s and %s, want the simulator's device files", edits.ControlDevicePath, edits.DevicePath(2))
	}
	if uuid := b.Inventory.GPUs[0].UUID; edits.MigDevicePath(uuid) != b.Simulator.MigDevicePath(uuid) {
		t.Errorf("MIG device path %s, want the simulator's", edits.MigDevicePath(uuid))
	}
	// The stand-in is copied next to the simulator's files, executable.
	wantSmi := filepath.Join(state, "simulated", "bin", "nvidia-smi")
	if edits.NvidiaSmiPath != wantSmi {
		t.Errorf("nvidia-smi path %q, want %q", edits.NvidiaSmiPath, wantSmi)
	}
	if data, err := os.ReadFile(wantSmi); err != nil || string(data) != "#!/bin/sh\necho simulated\n" {
		t.Errorf("copied stand-in: %q, %v", data, err)
	}
	if st, err := os.Stat(wantSmi); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("copied stand-in is not executable: %v %v", st, err)
	}
	if _, err := os.Stat(wantSmi + ".tmp"); err == nil {
		t.Error("the temporary copy was left behind")
	}
	if ts, ok := b.TimeSlicer.(*simulate.Simulator); !ok || ts != b.Simulator {
		t.Errorf("time slicer %T, want the simulator (it records slices)", b.TimeSlicer)
	}
	if _, ok := b.MPSLauncher.(sharing.StandIn); !ok {
		t.Errorf("MPS launcher %T, want the stand-in", b.MPSLauncher)
	}
}

// The same node opened twice (a restarted plugin) sees the same devices.
func TestOpenSimulatedIsStableAcrossRestarts(t *testing.T) {
	state := t.TempDir()
	o := Options{SimulateProfile: "h100x2", NodeName: "node-a", StateDir: state}
	first, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first.Inventory.GPUs {
		if first.Inventory.GPUs[i].UUID != second.Inventory.GPUs[i].UUID {
			t.Errorf("GPU %d: UUID %s then %s", i, first.Inventory.GPUs[i].UUID, second.Inventory.GPUs[i].UUID)
		}
	}
	other, err := Open(Options{SimulateProfile: "h100x2", NodeName: "node-b", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if other.Inventory.GPUs[0].UUID == first.Inventory.GPUs[0].UUID {
		t.Error("two nodes' simulated GPUs share a UUID")
	}
}

func TestOpenSimulatedWithoutAStubLeavesNvidiaSmiOut(t *testing.T) {
	// The test binary has no nvidia-smi-sim next to it.
	b, err := Open(Options{SimulateProfile: "h100x1", NodeName: "n", StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.Edits.(cdi.SimulatedEdits).NvidiaSmiPath; p != "" {
		t.Errorf("nvidia-smi path %q without a stand-in, want none", p)
	}
}

func TestOpenSimulatedErrors(t *testing.T) {
	if _, err := Open(Options{SimulateProfile: "nosuchgpux2", NodeName: "n", StateDir: t.TempDir()}); err == nil {
		t.Error("an unknown simulated model was accepted")
	}
	_, err := Open(Options{SimulateProfile: "h100x1", NodeName: "n", StateDir: t.TempDir(), NvidiaSmiStub: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "--nvidia-smi-stub") {
		t.Errorf("a missing stand-in: %v, want an error naming --nvidia-smi-stub", err)
	}
}

func TestInstallStub(t *testing.T) {
	src := filepath.Join(t.TempDir(), "stub")
	writeExecutable(t, src, "new")
	dst := filepath.Join(t.TempDir(), "deep", "bin", "nvidia-smi")

	// An older copy is replaced.
	writeExecutable(t, dst, "an older stand-in that is longer")
	got, err := installStub(src, dst)
	if err != nil || got != dst {
		t.Fatalf("installStub = %q, %v", got, err)
	}
	if data, _ := os.ReadFile(dst); !bytes.Equal(data, []byte("new")) {
		t.Errorf("installed %q, want the new stand-in whole", data)
	}

	// A file where the directory must be.
	blocked := filepath.Join(t.TempDir(), "file")
	writeExecutable(t, blocked, "")
	if _, err := installStub(src, filepath.Join(blocked, "bin", "nvidia-smi")); err == nil {
		t.Error("a destination under a file was accepted")
	}
	// A directory where the copy must go.
	dir := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := installStub(src, dir); err == nil {
		t.Error("a directory in the copy's place was replaced or ignored")
	}
	// A source that is a directory cannot be copied.
	if _, err := installStub(t.TempDir(), filepath.Join(t.TempDir(), "nvidia-smi")); err == nil {
		t.Error("a directory as the stand-in was accepted")
	}
}

func TestResolveHookDefaultsToTheOneNextToThePlugin(t *testing.T) {
	// No source: the plugin's own directory, where the test binary has
	// no nvidia-cdi-hook; the error names the way out.
	_, err := resolveHook(Options{HookInstallDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--nvidia-cdi-hook-path") || !strings.Contains(err.Error(), cdi.HookName) {
		t.Errorf("no hook next to the plugin: %v, want an error naming the hook and --nvidia-cdi-hook-path", err)
	}
	// An install directory under a file cannot be made.
	src := filepath.Join(t.TempDir(), cdi.HookName)
	writeExecutable(t, src, "#!/bin/sh\n")
	blocked := filepath.Join(t.TempDir(), "file")
	writeExecutable(t, blocked, "")
	if _, err := resolveHook(Options{HookInstallDir: filepath.Join(blocked, "bin"), HookSource: src}); err == nil {
		t.Error("an install directory under a file was accepted")
	}
}

func TestNewOverARealNVMLLibrary(t *testing.T) {
	// The simulator stands in for libnvidia-ml: New takes any NVML.
	sim, _, err := simulate.Discover("h100x2", "n", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	b, err := New(sim, Options{DriverRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Inventory.GPUs) != 2 || b.Simulator != nil || b.MPSLauncher != nil {
		t.Errorf("backend %+v: want 2 GPUs, no simulator and no local MPS launcher (real daemons run in pods)", b)
	}
	if _, ok := b.Edits.(*cdi.NvcdiEdits); !ok {
		t.Errorf("edits %T, want nvcdi's", b.Edits)
	}
	if ts, ok := b.TimeSlicer.(sharing.NvidiaTools); !ok || ts.Root != root {
		t.Errorf("time slicer %+v, want NVIDIA's tools under the driver root %s", b.TimeSlicer, root)
	}
	if _, err := New(sim, Options{DriverRoot: root, HookInstallDir: t.TempDir(), HookSource: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("New accepted a hook it cannot install")
	}
}
