// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// With DaemonDefaults (the simulator's devices node mode), the claim that
// starts a real daemon has its limits set as the daemon's defaults, through
// the daemon program's flags; without it (real GPUs), and for the stand-in,
// the pod is unchanged.
func TestDaemonPodCarriesTheClaimsLimitsAsDefaults(t *testing.T) {
	d := (&MPS{Root: "/var/lib/kubelet/plugins/gpu.nvidia.com/mps"}).Daemon(fakeUUID)
	d.Defaults = Settings{ActiveThreadPercentage: 25, PinnedMemoryBytes: 20 << 30}
	real, _ := newPodRunner("/run/nvidia/driver")
	if args := real.Pod(d).Spec.Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--default-") }) {
		t.Errorf("a real GPU's daemon pod gets defaults: %v", args)
	}
	real.DaemonDefaults = true
	args := real.Pod(d).Spec.Containers[0].Args
	for _, want := range []string{"--default-active-thread-percentage=25", "--default-pinned-memory-bytes=21474836480"} {
		if !slices.Contains(args, want) {
			t.Errorf("real daemon pod args %v lack %s", args, want)
		}
	}
	sim, _ := newPodRunner("")
	sim.DaemonDefaults = true
	if args := sim.Pod(d).Spec.Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--default-") }) {
		t.Errorf("simulated daemon pod args %v carry limits", args)
	}
	d.Defaults = Settings{}
	if args := real.Pod(d).Spec.Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--default-") }) {
		t.Errorf("a daemon without limits gets %v", args)
	}
}

// NVIDIA's control commands, in the form nvidia-cuda-mps-control takes
// (proven against R535: `get_default_device_pinned_mem_limit 0` then
// answers 20G).
func TestDefaultCommands(t *testing.T) {
	got := DefaultCommands(Settings{ActiveThreadPercentage: 25, PinnedMemoryBytes: 20 << 30})
	want := []string{"set_default_active_thread_percentage 25", "set_default_device_pinned_mem_limit 0 20480M"}
	if !slices.Equal(got, want) {
		t.Errorf("DefaultCommands = %q, want %q", got, want)
	}
	if got := DefaultCommands(Settings{}); len(got) != 0 {
		t.Errorf("no limits: %q", got)
	}
}

// Given the starting claim's limits, the daemon program sets them on the
// daemon once its control pipe exists, before `quit` at the end.
func TestDaemonProgramSetsTheDefaults(t *testing.T) {
	root := fakeDriverRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	p := DaemonProgram{DeviceUUID: fakeUUID, Dir: t.TempDir(), DriverRoot: root, Defaults: Settings{ActiveThreadPercentage: 25, PinnedMemoryBytes: 20 << 30}}
	go func() { done <- p.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if recs, err := os.ReadFile(filepath.Join(root, "records.jsonl")); err == nil && strings.Count(string(recs), "\n") >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the defaults were not set")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var stdin []string
	for _, r := range records(t, root)[1:] {
		stdin = append(stdin, strings.TrimSpace(r.Stdin))
		checkRanInRoot(t, r, root, "CUDA_MPS_PIPE_DIRECTORY="+ContainerPipeDir, "CUDA_MPS_LOG_DIRECTORY="+ContainerLogDir)
	}
	want := []string{"set_default_active_thread_percentage 25", "set_default_device_pinned_mem_limit 0 20480M",
		"get_default_active_thread_percentage", "get_default_device_pinned_mem_limit 0", "quit"}
	if !slices.Equal(stdin, want) {
		t.Errorf("control commands %q, want %q", stdin, want)
	}
}
