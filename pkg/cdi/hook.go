// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// HookName is the file name of NVIDIA's CDI hook binary.
const HookName = "nvidia-cdi-hook"

// HookSumSuffix names the checksum file the image ships next to the hook
// (HookName + HookSumSuffix), written when the image is built (Dockerfile,
// hack/cluster/images.sh) in sha256sum's format: "<hex>  nvidia-cdi-hook".
const HookSumSuffix = ".sha256"

// afterInstall runs after the hook is renamed into place; tests change
// the installed copy there to check that InstallHook verifies it.
var afterInstall = func(string) {}

// InstallHook copies the nvidia-cdi-hook binary src into dir, a directory
// the host sees at the same path, and returns the installed path, which
// CDI specs then name. The container runtime runs hooks on the host, so
// the hook must be there, and it must know every subcommand that this
// build's nvcdi writes into specs: a host's own (possibly older) toolkit
// may not.
//
// The runtime runs the copy as root, so it is checked by SHA-256 against
// src, which the read-only image holds (and against src's checksum file,
// when the image ships one): an existing copy is reused only when it is a
// regular file of this process's user that no one else may write, with
// src's checksum; anything else there (a changed copy, a symbolic link) is
// replaced. The copy is written through a temporary file renamed into
// place, so a runtime executing the old copy at that moment is unaffected,
// and checked again once in place: InstallHook fails rather than have CDI
// specs name a hook that is not the image's.
// maxHookSize caps the read of the hook binary (nvidia-cdi-hook is about
// 10 MB): every read of a file through pkg/capfile, regular files only.
const maxHookSize = 256 << 20

func InstallHook(src, dir string) (string, error) {
	data, err := capfile.Read(src, maxHookSize)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", HookName, err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	if err := checkRecordedSum(src, want); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, HookName)
	if VerifyHook(dst, want) == nil {
		return dst, nil
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
	afterInstall(dst)
	if err := VerifyHook(dst, want); err != nil {
		return "", fmt.Errorf("install %s: the installed copy is not the image's: %w", HookName, err)
	}
	return dst, nil
}

// checkRecordedSum compares the hook's checksum with the one the image
// recorded at build time, when there is one.
func checkRecordedSum(src, sum string) error {
	recorded, err := capfile.Read(src+HookSumSuffix, 1<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s's checksum: %w", HookName, err)
	}
	fields := strings.Fields(string(recorded))
	if len(fields) == 0 || !strings.EqualFold(fields[0], sum) {
		return fmt.Errorf("%s in the image has SHA-256 %s but %s%s, written when the image was built, records %q: the image is damaged; pull it again",
			HookName, sum, src, HookSumSuffix, strings.TrimSpace(string(recorded)))
	}
	return nil
}

// VerifyHook checks an installed hook: a regular file, not a symbolic
// link, owned by this process's user, executable, writable by no one
// else, whose SHA-256 is sum (hex).
func VerifyHook(path, sum string) error {
	// O_NONBLOCK: a FIFO put where the hook belongs would otherwise hold
	// the open (and start) until a writer came; it fails the regular-file
	// check below instead.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, not %d", path, sys.Uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o111 != 0o111 || perm&0o022 != 0 {
		return fmt.Errorf("%s has mode %v, want executable and writable by its owner only", path, perm)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%s has SHA-256 %s, want %s", path, got, sum)
	}
	return nil
}
