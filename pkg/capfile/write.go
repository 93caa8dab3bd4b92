// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package capfile

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// TempPrefix starts the name of a file WriteAtomic has not renamed yet;
// what a crash leaves of one may be removed by whoever lists the dir.
const TempPrefix = ".tmp-"

// WriteAtomic replaces path by data with the given mode: a temporary file
// in the same directory, fsynced when durable, then renamed over path, so
// a reader never sees a half-written file.
//
// It makes no system call a successful write does not need: the temp file
// is created with its mode (chmod only where the umask would narrow it),
// renamed without the lstat os.Rename adds, and removed only when the
// write failed. The calls are counted (Snapshot).
func WriteAtomic(path string, data []byte, mode os.FileMode, durable bool) error {
	return WriteAtomicVia(filepath.Dir(path), path, data, mode, durable, nil)
}

// WriteAtomicVia is WriteAtomic with the temporary file in tmpDir, which
// must be on path's filesystem: for a directory that others read, such as
// the CDI directory, where a temp file a killed writer left is better
// kept in a directory of the writer's own (pkg/cdi's staging directory).
// check, if not nil, is called with the temp file's path once it is
// written and closed; its error fails the write before the rename.
func WriteAtomicVia(tmpDir, path string, data []byte, mode os.FileMode, durable bool, check func(tmp string) error) (err error) {
	fd, tmp, err := createTemp(tmpDir, mode)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = Remove(tmp)
		}
	}()
	// Raw system calls: an *os.File would add one (epoll_ctl, which a
	// regular file refuses) to each open.
	for rest := data; len(rest) > 0; {
		n, err := syscall.Write(fd, rest)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			_ = syscall.Close(fd)
			return &os.PathError{Op: "write", Path: tmp, Err: err}
		}
		rest = rest[n:]
	}
	if durable {
		counts.fsync.Add(1)
		if err := syscall.Fsync(fd); err != nil {
			_ = syscall.Close(fd)
			return &os.PathError{Op: "fsync", Path: tmp, Err: err}
		}
	}
	if err := syscall.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: tmp, Err: err}
	}
	if check != nil {
		if err := check(tmp); err != nil {
			return err
		}
	}
	return Rename(tmp, path)
}

// createTemp creates a new file named TempPrefix and a random number in
// dir, open for writing, with exactly mode.
func createTemp(dir string, mode os.FileMode) (int, string, error) {
	for try := 0; ; try++ {
		name := filepath.Join(dir, TempPrefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		counts.open.Add(1)
		fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, uint32(mode.Perm()))
		if errors.Is(err, syscall.EINTR) || (errors.Is(err, syscall.EEXIST) && try < 100) {
			continue
		}
		if err != nil {
			return -1, "", &os.PathError{Op: "open", Path: name, Err: err}
		}
		if narrowed(mode) {
			counts.chmod.Add(1)
			if err := syscall.Fchmod(fd, uint32(mode.Perm())); err != nil {
				_ = syscall.Close(fd)
				_ = Remove(name)
				return -1, "", &os.PathError{Op: "chmod", Path: name, Err: err}
			}
		}
		return fd, name, nil
	}
}

// Rename renames a file (rename(2), counted).
func Rename(from, to string) error {
	counts.rename.Add(1)
	if err := syscall.Rename(from, to); err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// Remove removes a file, not a directory (unlink(2), counted): unlike
// os.Remove it does not try rmdir(2) after a failed unlink.
func Remove(path string) error {
	counts.unlink.Add(1)
	if err := syscall.Unlink(path); err != nil {
		return &os.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

// Rmdir removes an empty directory (counted as an unlink: unlinkat(2)).
func Rmdir(path string) error {
	counts.unlink.Add(1)
	if err := syscall.Rmdir(path); err != nil {
		return &os.PathError{Op: "rmdir", Path: path, Err: err}
	}
	return nil
}

// Mkdir makes one directory (mkdir(2), counted).
func Mkdir(path string, perm os.FileMode) error {
	counts.mkdir.Add(1)
	return os.Mkdir(path, perm)
}

// ReadDirNames lists a directory's entries (counted as one open).
func ReadDirNames(dir string) ([]string, error) {
	counts.open.Add(1)
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// Glob is filepath.Glob (counted as one open: a listing of one
// directory, for a pattern with wildcards in its last element only).
func Glob(pattern string) ([]string, error) {
	counts.open.Add(1)
	return filepath.Glob(pattern)
}
