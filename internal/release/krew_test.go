// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeDist writes what make release writes for kubectl-gpu into a temp
// dir, from fake binaries: the archives, SHA256SUMS and plugin.yaml.
func fakeDist(t *testing.T, version string) string {
	t.Helper()
	bins, dir := t.TempDir(), t.TempDir()
	license := filepath.Join(bins, "LICENSE")
	if err := os.WriteFile(license, []byte("Apache License 2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range Platforms {
		bin := filepath.Join(bins, "kubectl-gpu-"+p.OS+"-"+p.Arch)
		if p.OS == "windows" {
			bin += ".exe"
		}
		if err := os.WriteFile(bin, []byte("binary for "+p.OS+"/"+p.Arch), 0o755); err != nil {
			t.Fatal(err)
		}
		files := []ArchiveFile{{Name: "LICENSE", Src: license, Mode: 0o644}, {Name: p.Bin(), Src: bin, Mode: 0o755}}
		if err := WriteArchive(filepath.Join(dir, p.ArchiveName(version)), files, time.Unix(1764320000, 0)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewKrewManifest(dir, version, DefaultBaseURL(version))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteKrewManifest(filepath.Join(dir, "plugin.yaml"), m); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range Platforms {
		names = append(names, p.ArchiveName(version))
	}
	if err := WriteSHA256Sums(dir, names); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestKrewManifestAndVerify(t *testing.T) {
	dir := fakeDist(t, "v0.2.0")
	if err := VerifyDist(dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "plugin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Plugin", "name: gpu", "version: v0.2.0",
		"uri: " + Homepage + "/releases/download/v0.2.0/kubectl-gpu_v0.2.0_windows_arm64.zip", "bin: kubectl-gpu.exe"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("plugin.yaml lacks %q:\n%s", want, data)
		}
	}
	names, err := ArchiveNames(filepath.Join(dir, "kubectl-gpu_v0.2.0_darwin_arm64.tar.gz"))
	if err != nil || strings.Join(names, ",") != "LICENSE,kubectl-gpu" {
		t.Errorf("darwin/arm64 archive holds %v, %v", names, err)
	}

	// One byte changed in one archive: its sha256 no longer matches.
	tampered := filepath.Join(dir, "kubectl-gpu_v0.2.0_linux_amd64.tar.gz")
	orig, err := os.ReadFile(tampered)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(orig)
	bad[len(bad)/2] ^= 0xff
	if err := os.WriteFile(tampered, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	err = VerifyDist(dir)
	if err == nil || !strings.Contains(err.Error(), "linux/amd64: plugin.yaml says sha256") || strings.Contains(err.Error(), "darwin") {
		t.Errorf("tampered linux/amd64 archive: %v", err)
	}
	if err := os.WriteFile(tampered, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	// A platform missing from the manifest is named.
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), bytes.Replace(data, []byte("os: windows"), []byte("os: plan9"), 2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := VerifyDist(dir); err == nil || !strings.Contains(err.Error(), "no platform windows/amd64") {
		t.Errorf("manifest without windows: %v", err)
	}
}

// TestArchivesReproducible: the same files and time give the same bytes,
// so a release's sums depend on its commit only.
func TestArchivesReproducible(t *testing.T) {
	a, b := fakeDist(t, "v0.2.0"), fakeDist(t, "v0.2.0")
	for _, p := range Platforms {
		x, _ := SHA256File(filepath.Join(a, p.ArchiveName("v0.2.0")))
		y, _ := SHA256File(filepath.Join(b, p.ArchiveName("v0.2.0")))
		if x != y || x == "" {
			t.Errorf("%s: %s vs %s", p.ArchiveName("v0.2.0"), x, y)
		}
	}
	if _, err := NewKrewManifest(a, "0.2.0", "x"); err == nil {
		t.Error("a version without v accepted; krew refuses it")
	}
	if err := WriteArchive(filepath.Join(t.TempDir(), "x.rar"), nil, time.Now()); err == nil {
		t.Error("x.rar accepted")
	}
}
