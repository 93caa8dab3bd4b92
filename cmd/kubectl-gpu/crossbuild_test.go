// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"testing"
)

// crossTargets are platforms operators run kubectl on besides the Linux
// amd64 one the tests run on: macOS on Apple silicon, Windows, and arm64
// Linux (Graviton, Grace, Raspberry Pi).
var crossTargets = []struct{ goos, goarch string }{
	{"darwin", "arm64"},
	{"windows", "amd64"},
	{"linux", "arm64"},
}

// TestBuildsWithoutCgo builds kubectl-gpu with CGO_ENABLED=0 for each of
// crossTargets, as `make kubectl-gpu-dist` does, so that a package needing
// cgo, or one that builds on Linux only, fails here and not on an
// operator's laptop. The build cache keeps it to seconds once warm (a
// minute or two cold on two cores).
func TestBuildsWithoutCgo(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	for _, p := range crossTargets {
		cmd := exec.Command(goTool, "build", "-tags", "grpcnotrace", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.goos, "GOARCH="+p.goarch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("CGO_ENABLED=0 GOOS=%s GOARCH=%s go build ./cmd/kubectl-gpu: %v\n%s", p.goos, p.goarch, err, out)
		}
	}
}
