// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoRunsFromAReleaseBinary builds gpudra the way the image does
// (-trimpath: no source paths in the binary) and runs the offline demo
// from a directory without the repository, as an operator would run it
// from the image. It fails when the binary reads a file of the checkout.
func TestDemoRunsFromAReleaseBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	bin := t.TempDir()
	for _, pkg := range []string{".", "../nvidia-smi-sim"} {
		cmd := exec.Command(goTool, "build", "-trimpath", "-tags", "grpcnotrace", "-o", bin, pkg)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "gpudra"), "demo", "--simulate", "h100x2",
		"--nvidia-smi-stub", filepath.Join(bin, "nvidia-smi-sim"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+cmd.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpudra demo from %s: %v\n%s", cmd.Dir, err, out)
	}
	if !strings.Contains(string(out), "nvidia-smi -L IN THE CONTAINER") {
		t.Fatalf("the demo did not get to its table:\n%s", out)
	}
}
