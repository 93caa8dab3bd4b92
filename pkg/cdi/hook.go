// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// HookName is the file name of NVIDIA's CDI hook binary.
const HookName = "nvidia-cdi-hook"

// InstallHook copies the nvidia-cdi-hook binary src into dir, a directory
// the host sees at the same path, and returns the installed path, which
// CDI specs then name. The container runtime runs hooks on the host, so
// the hook must be there, and it must know every subcommand that this
// build's nvcdi writes into specs: a host's own (possibly older) toolkit
// may not. The copy is written only when its content differs, through a
// temporary file renamed into place, so a runtime executing the old copy
// at that moment is unaffected.
func InstallHook(src, dir string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", HookName, err)
	}
	dst := filepath.Join(dir, HookName)
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		if st, err := os.Stat(dst); err == nil && st.Mode().Perm()&0o111 == 0o111 {
			return dst, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	tmp, err := os.CreateTemp(dir, "."+HookName+"-*")
	if err != nil {
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("install %s: %w", HookName, err)
	}
	return dst, nil
}
