// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build linux

package cdi

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// failedWriteChild marks the test binary that TestFailedWriteLeavesNoTempFile
// runs with a file size limit.
const failedWriteChild = "GPU_DRA_CDI_FAILED_WRITE_CHILD"

// TestFailedWriteLeavesNoTempFile: a spec write that fails half-way (a full
// CDI directory) must not leave its temp file behind, or every kubelet retry
// takes whatever space was just freed and the directory stays full. It must
// not touch another claim's write in flight either, and once there is room
// again the write succeeds.
//
// The write fails for real: the file size limit (RLIMIT_FSIZE) lets it
// create its temp file but not fill it. The limit is
// set in a child process, this same test, so nothing else in the package
// runs under it.
func TestFailedWriteLeavesNoTempFile(t *testing.T) {
	if os.Getenv(failedWriteChild) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFailedWriteLeavesNoTempFile$", "-test.v")
		cmd.Env = append(os.Environ(), failedWriteChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child test: %v\n%s", err, out)
		}
		return
	}

	dir := t.TempDir()
	w, err := NewWriter(dir, "gpu.nvidia.com", SimulatedEdits{
		DevicePath:        func(minor int) string { return "/var/run/simulated/nvidia0" },
		ControlDevicePath: "/var/run/simulated/nvidiactl",
	})
	if err != nil {
		t.Fatal(err)
	}
	// Another claim's write in flight: its temp file is not this write's to
	// remove.
	inFlight := filepath.Join(w.stagingDir(), "spec.424242.tmp")
	if err := os.WriteFile(inFlight, []byte(`{"cdiVersion":`), 0o644); err != nil {
		t.Fatal(err)
	}
	devices := []Device{{Name: "gpu-0", UUID: "GPU-00000000-0000-0000-0000-000000000000"}}
	annotations := map[string]string{"gpu.nvidia.com/prepared-claim": `{"claim":"full"}`}

	// Without SIGXFSZ ignored, going over the limit kills the process
	// instead of failing the write with EFBIG.
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	small := limit
	small.Cur = 16
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &small); err != nil {
		t.Fatal(err)
	}
	writeErr := w.Write("u-full", devices, annotations)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(writeErr, syscall.EFBIG) {
		t.Fatalf("Write under a 16-byte file size limit: got %v, want EFBIG", writeErr)
	}
	if left := leftovers(t, w, inFlight); len(left) > 0 {
		t.Fatalf("the failed write left %q behind", left)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("another claim's write in flight was touched: %v", err)
	}

	if err := w.Write("u-full", devices, annotations); err != nil {
		t.Fatalf("Write once there is room again: %v", err)
	}
	if got, ok := w.Annotations("u-full"); !ok || !maps.Equal(got, annotations) {
		t.Fatalf("the spec written once there is room again is not intact: %v, %v", got, ok)
	}
	if left := leftovers(t, w, inFlight, w.SpecPath("u-full")); len(left) > 0 {
		t.Fatalf("the successful write left %q behind", left)
	}
}

// leftovers lists what is in the writer's directory, files or directories,
// other than its staging directory and the files named.
func leftovers(t *testing.T, w *Writer, expected ...string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != w.dir && path != w.stagingDir() && !slices.Contains(expected, path) {
			left = append(left, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return left
}
