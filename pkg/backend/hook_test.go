// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"os"
	"path/filepath"
	"testing"
)

// Defect 6: with an install directory (the chart mounts one from the host
// at the same path), the plugin copies its nvidia-cdi-hook there and CDI
// specs name that host path; an explicit --nvidia-cdi-hook-path wins.
func TestRealBackendInstallsTheHookItNames(t *testing.T) {
	src := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "var", "lib", "gpu-dra-driver", "bin")

	got, err := resolveHook(Options{HookInstallDir: dir, HookSource: src})
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dir, "nvidia-cdi-hook") {
		t.Errorf("hook path %s, want it in %s", got, dir)
	}
	if st, err := os.Stat(got); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("installed hook: %v %v", st, err)
	}

	if got, _ := resolveHook(Options{HookInstallDir: dir, HookSource: src, HookPath: "/usr/local/bin/nvidia-cdi-hook"}); got != "/usr/local/bin/nvidia-cdi-hook" {
		t.Errorf("explicit hook path lost: %s", got)
	}
	if got, _ := resolveHook(Options{}); got != "" {
		t.Errorf("no install dir and no path: %q, want nvcdi's default", got)
	}
	if _, err := resolveHook(Options{HookInstallDir: dir, HookSource: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("a missing hook binary was not reported")
	}
}
