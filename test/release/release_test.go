// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package release_test checks what `make release` ships against the
// checkout: the chart's version is CHANGELOG.md's newest release, and the
// krew manifest's sha256 values are its archives' (dist/ when make release
// wrote one, else cmd/releasetool run on fake binaries in a temp dir).
package release_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/release"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestChartVersionIsNewestRelease: the chart's appVersion (its default
// image tag) and version are CHANGELOG.md's newest release, which has its
// Upgrading section.
func TestChartVersionIsNewestRelease(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := release.ParseChangelog(data)
	if err != nil {
		t.Fatal(err)
	}
	chart, err := release.ReadChart(filepath.Join(root, "deployments", "helm", "gpu-dra-driver", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := release.CheckChartMatches(chart, log); err != nil {
		t.Error(err)
	}
	for _, r := range log.Releases {
		for _, want := range []string{"### Upgrading", "Running claims", "Chart values", "Kubernetes", "Checkpoint format"} {
			if !strings.Contains(r.Notes, want) {
				t.Errorf("CHANGELOG.md [%s] lacks %q: each release says how to upgrade to it", r.Version, want)
			}
		}
	}
}

// TestKrewManifestMatchesArchives: dist/plugin.yaml's sha256 values are
// its archives' and SHA256SUMS' when make release wrote dist/; without
// one, cmd/releasetool writes archives of fake binaries, the manifest
// and SHA256SUMS into a temp dir, and its verify must pass there and fail
// once one archive byte changes.
func TestKrewManifestMatchesArchives(t *testing.T) {
	root := repoRoot(t)
	dist := filepath.Join(root, "dist")
	if _, err := os.Stat(filepath.Join(dist, "plugin.yaml")); err == nil {
		if err := release.VerifyDist(dist); err != nil {
			t.Fatalf("dist/ (make release): %v", err)
		}
		t.Logf("dist/plugin.yaml matches dist/'s archives and SHA256SUMS")
		return
	}
	tool := filepath.Join(t.TempDir(), "releasetool")
	if out, err := exec.Command("go", "build", "-o", tool, filepath.Join(root, "cmd", "releasetool")).CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/releasetool: %v\n%s", err, out)
	}
	run := func(args ...string) error {
		out, err := exec.Command(tool, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("releasetool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	bins, dir := t.TempDir(), t.TempDir()
	for _, p := range release.Platforms {
		name := "kubectl-gpu-" + p.OS + "-" + p.Arch
		if p.OS == "windows" {
			name += ".exe"
		}
		if err := os.WriteFile(filepath.Join(bins, name), []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"archives", dir, "v0.2.0", bins, filepath.Join(root, "LICENSE"), "1764320000"},
		{"krew", dir, "v0.2.0", "https://example.com/v0.2.0"},
		{"sums", dir},
		{"verify", dir},
	} {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	archive := filepath.Join(dir, release.Platforms[3].ArchiveName("v0.2.0"))
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 1
	if err := os.WriteFile(archive, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run("verify", dir); err == nil || !strings.Contains(err.Error(), "darwin/arm64") {
		t.Errorf("verify after one byte of the darwin/arm64 archive changed: %v", err)
	}
}
