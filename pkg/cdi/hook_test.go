// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
)

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// The hook lands in the host directory whole and executable, is left alone
// while unchanged, and a new version replaces it by rename, so a runtime
// executing the old one at that moment keeps its file.
func TestInstallHookIsAtomicAndOnlyWhenChanged(t *testing.T) {
	src := filepath.Join(t.TempDir(), HookName)
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gpu-dra-driver", "bin")
	path, err := InstallHook(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, HookName) {
		t.Fatalf("installed at %s", path)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", st.Mode().Perm())
	}
	first := inode(t, path)
	if _, err := InstallHook(src, dir); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) != first {
		t.Error("an unchanged hook was rewritten")
	}

	running, err := os.Open(path) // a runtime executing the old copy
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	if err := os.WriteFile(src, []byte("#!/bin/sh\necho v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := InstallHook(src, dir); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) == first {
		t.Error("a changed hook was written in place, not renamed into place")
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "v2") {
		t.Errorf("installed %q", data)
	}
	old := make([]byte, 64)
	n, _ := running.Read(old)
	if !strings.Contains(string(old[:n]), "v1") {
		t.Errorf("the old copy changed under its reader: %q", old[:n])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
	if _, err := InstallHook(filepath.Join(t.TempDir(), "missing"), dir); err == nil {
		t.Error("installing a missing hook succeeded")
	}
}

// pinnedToolkit is the nvidia-container-toolkit version go.mod pins.
func pinnedToolkit(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/NVIDIA/nvidia-container-toolkit").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Defect 6: the image ships nvidia-cdi-hook built from the pinned
// nvidia-container-toolkit, so it knows every subcommand this build's
// nvcdi writes into specs (a host's older toolkit may not know
// enable-cuda-compat, disable-device-node-modification,
// update-application-profile or apply-cuda-memory-limits). The test builds
// the hook as the build scripts do and runs each subcommand of real specs,
// for a whole GPU and a MIG device, with --help.
func TestPinnedHookKnowsEverySubcommandNvcdiWrites(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not in PATH")
	}
	version := pinnedToolkit(t)
	const pkg = "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
	// The Dockerfile builds through hack/build-arch.sh (both platforms).
	if data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile")); err != nil || !strings.Contains(string(data), "hack/build-arch.sh") {
		t.Errorf("Dockerfile does not build the hook through hack/build-arch.sh (%v)", err)
	}
	for _, file := range []string{"Makefile", filepath.Join("hack", "build-arch.sh"), filepath.Join("hack", "cluster", "images.sh")} {
		data, err := os.ReadFile(filepath.Join("..", "..", file))
		if err != nil {
			t.Fatal(err)
		}
		// Built with `go install <pkg>@<the version go.mod pins>`.
		if !strings.Contains(string(data), pkg) || !strings.Contains(string(data), "list -m -f '{{.Version}}' github.com/NVIDIA/nvidia-container-toolkit") {
			t.Errorf("%s does not build %s at the version go.mod pins", file, pkg)
		}
	}

	bin := t.TempDir()
	install := exec.Command("go", "install", "-trimpath", "-ldflags", "-s -w", pkg+"@"+version)
	install.Env = append(os.Environ(), "GOBIN="+bin, "CGO_ENABLED=1")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("build %s@%s: %v\n%s", pkg, version, err, out)
	}

	n := newNode(t, 2, true)
	hook, err := InstallHook(filepath.Join(bin, HookName), filepath.Join(t.TempDir(), "host-bin"))
	if err != nil {
		t.Fatal(err)
	}
	n.hook = hook
	mig := "MIG-5d5b8a3e-7b2a-5f9e-9d55-0f7e52cb6b10"
	gi, ci := n.nvml.AddMig(1, mig)
	n.root.AddMigCaps(t, 1, gi, ci, 39, 40)
	injected, raw := applied(t, n.edits(t),
		Device{Name: "gpu-0", UUID: n.nvml.UUID(0)},
		Device{Name: "gpu-1-mig-1g10gb-19-0", UUID: mig, ParentUUID: n.nvml.UUID(1), Minor: 1})
	checkOnHost(t, raw, injected) // runs `<hook> <subcommand> --help` for every hook

	var subs []string
	for _, h := range append(append(injected.Hooks.CreateRuntime, injected.Hooks.CreateContainer...), injected.Hooks.StartContainer...) {
		if h.Path != hook {
			t.Errorf("hook %v runs %s, want %s", h.Args, h.Path, hook)
		}
		subs = append(subs, h.Args[1])
	}
	for _, want := range []string{"enable-cuda-compat", "disable-device-node-modification", "update-application-profile", "apply-cuda-memory-limits", "create-symlinks", "update-ldcache"} {
		if !slices.Contains(subs, want) {
			t.Errorf("the specs use %v; expected %s among them", subs, want)
		}
	}
	for _, sub := range cditest.HookSubcommands {
		out, err := exec.Command(hook, sub, "--help").CombinedOutput()
		if err != nil || strings.Contains(string(out), "Unsupported") {
			t.Errorf("the pinned hook does not know %s, which cditest's stand-in claims: %v %s", sub, err, out)
		}
	}
}
