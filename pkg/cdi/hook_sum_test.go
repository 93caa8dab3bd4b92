// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sumOf(data string) string {
	s := sha256.Sum256([]byte(data))
	return hex.EncodeToString(s[:])
}

const imageHook = "#!/bin/sh\necho the image's hook\n"

func writeImageHook(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), HookName)
	if err := os.WriteFile(src, []byte(imageHook), 0o755); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestInstallHookReplacesATamperedCopy: whatever sits at the hook's host
// path and is not exactly the image's hook, as a file only its owner may
// write, is replaced by the image's; the runtime runs it as root.
func TestInstallHookReplacesATamperedCopy(t *testing.T) {
	evil := strings.Replace(imageHook, "image's", "attacker", 1)[:len(imageHook)] // same size
	elsewhere := filepath.Join(t.TempDir(), "same-content")
	if err := os.WriteFile(elsewhere, []byte(imageHook), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(dst string) error{
		"changed content": func(dst string) error { return os.WriteFile(dst, []byte(evil), 0o755) },
		// Right content now, but whoever controls the link's target
		// changes what the runtime runs later.
		"symbolic link": func(dst string) error { return os.Symlink(elsewhere, dst) },
		// Right content, writable by others.
		"group and world writable": func(dst string) error {
			if err := os.WriteFile(dst, []byte(imageHook), 0o777); err != nil {
				return err
			}
			return os.Chmod(dst, 0o777)
		},
	} {
		t.Run(name, func(t *testing.T) {
			src := writeImageHook(t)
			dir := t.TempDir()
			dst := filepath.Join(dir, HookName)
			if err := plant(dst); err != nil {
				t.Fatal(err)
			}
			path, err := InstallHook(src, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyHook(path, sumOf(imageHook)); err != nil {
				t.Errorf("after install: %v", err)
			}
			st, err := os.Lstat(path)
			if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o755 {
				t.Errorf("installed hook: %v %v", st.Mode(), err)
			}
			if data, _ := os.ReadFile(path); string(data) != imageHook {
				t.Errorf("installed %q", data)
			}
		})
	}
}

// TestVerifyHookDetectsTampering: each way a host copy can differ from
// the image's hook is named.
func TestVerifyHookDetectsTampering(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(imageHook), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := VerifyHook(good, sumOf(imageHook)); err != nil {
		t.Fatalf("the image's hook: %v", err)
	}
	changed := filepath.Join(dir, "changed")
	if err := os.WriteFile(changed, []byte(imageHook+"rm -rf /\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	writable := filepath.Join(dir, "writable")
	if err := os.WriteFile(writable, []byte(imageHook), 0o755); err != nil || os.Chmod(writable, 0o757) != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{changed: "SHA-256", link: "", writable: "mode"} {
		err := VerifyHook(path, sumOf(imageHook))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error about %q", filepath.Base(path), err, want)
		}
	}
}

// TestInstallHookChecksTheCopyInPlace: a copy that changes between the
// write and its use (another writer, a failing disk) fails the install
// instead of being named in CDI specs.
func TestInstallHookChecksTheCopyInPlace(t *testing.T) {
	defer func(f func(string)) { afterInstall = f }(afterInstall)
	afterInstall = func(dst string) {
		if err := os.WriteFile(dst, []byte("#!/bin/sh\necho swapped\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := InstallHook(writeImageHook(t), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not the image's") || !strings.Contains(err.Error(), sumOf(imageHook)) {
		t.Errorf("a copy changed after the write: %v", err)
	}
}

// TestInstallHookChecksTheImageChecksum: the checksum recorded when the
// image was built must match the image's hook.
func TestInstallHookChecksTheImageChecksum(t *testing.T) {
	src := writeImageHook(t)
	if err := os.WriteFile(src+HookSumSuffix, []byte(sumOf(imageHook)+"  "+HookName+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := InstallHook(src, t.TempDir()); err != nil {
		t.Fatalf("matching checksum: %v", err)
	}
	if err := os.WriteFile(src+HookSumSuffix, []byte(sumOf("another hook")+"  "+HookName+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := InstallHook(src, dir); err == nil || !strings.Contains(err.Error(), "image is damaged") {
		t.Errorf("a hook that does not match the image's checksum: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, HookName)); err == nil {
		t.Error("a hook that does not match the image's checksum was installed")
	}
}
