// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package gpusmoke

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMPS puts a static nvidia-cuda-mps-control stand-in (the recorder of
// pkg/sharing's tests: as -f it creates the control pipe and waits for
// `quit`) into the fake driver root, and returns a python stand-in that
// plays the CUDA client: it "allocates" only when it finds the daemon's
// control pipe and the 2 GiB limit in its environment. chroot needs root:
// without it no MPS tool is installed and the step is skipped.
func fakeMPS(t *testing.T, root, bin string) string {
	t.Helper()
	python := filepath.Join(bin, "python3")
	body := `#!/bin/sh
[ "$2" = "import torch" ] && exit 0
if [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] && [ "$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" = "0=2048M" ]; then
  echo "alloc 1GiB: ok"; echo "alloc 3GiB: failed: CUDA out of memory (stand-in)"
else
  echo "alloc 1GiB: failed: no daemon at $CUDA_MPS_PIPE_DIRECTORY or limit $CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
fi
`
	if err := os.WriteFile(python, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		return python
	}
	if err := os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(root, "usr", "bin", "nvidia-cuda-mps-control")
	_ = os.Remove(tool) // the fake root's placeholder
	cmd := exec.Command("go", "build", "-o", tool, "./pkg/sharing/testdata/recorder")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the MPS stand-in: %v\n%s", err, out)
	}
	return python
}

// checkMPS: the step passed, and the daemon ran chrooted into the driver
// root, in a temporary pipe directory, for GPU 0 only, and got `quit`.
func (h host) checkMPS(t *testing.T, out string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if !strings.Contains(out, "SKIP   MPS") {
			t.Error("without root (no chroot) the MPS step must be skipped")
		}
		return
	}
	for _, want := range []string{"PASS   MPS daemon started", "PASS   MPS client: 1 GiB under a 2 GiB limit", "PASS   MPS client: 3 GiB over a 2 GiB limit", "PASS   MPS daemon stopped with quit"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	data, err := os.ReadFile(filepath.Join(h.root, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recs := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(recs) != 2 || !strings.Contains(recs[0], `"args":["-f"]`) || !strings.Contains(recs[0], `CUDA_VISIBLE_DEVICES=GPU-`) ||
		!strings.Contains(recs[0], `CUDA_MPS_PIPE_DIRECTORY=/tmp/gpu-smoke-mps.`) || !strings.Contains(recs[1], `"stdin":"quit\n"`) {
		t.Errorf("MPS tool calls:\n%s", data)
	}
	if left, _ := filepath.Glob(filepath.Join(h.root, "tmp", "gpu-smoke-mps.*")); len(left) != 0 {
		t.Errorf("MPS directories left: %v", left)
	}
}
