// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// metadataFileOps are the file operations the kubelet plugin helper
// writes and removes device metadata with (metadata.go; the helper's
// layout, kubeletplugin/metadata.go v0.37.2), with no system call a
// prepare does not need. The helper's own write fsyncs each file and its
// directory (four fsyncs per claim) and removes a claim's files with
// os.RemoveAll; neither is needed here:
//
//   - The metadata CDI spec lives in the CDI directory, a tmpfs that a
//     reboot empties: an fsync there buys nothing. Its temp file goes
//     into the CDI writer's staging directory, which CDI readers skip and
//     start-up clears, not into the CDI directory.
//   - The metadata file (under the plugin directory) is written again,
//     with the spec, by every prepare of the claim, including the one the
//     kubelet makes of every claim after its own restart (a reboot
//     included: the kubelet's checkpoint marks no claim prepared); start-up
//     rewrites the specs of the files it finds (metadata_restore.go). It is
//     derived from the claim's record, which is the durable write, so it
//     is written atomically (a reader never sees half a file) but not
//     fsynced.
//   - Directories: the CDI directory exists (cdi.NewWriter made it; a
//     write that finds it gone makes it again), and a claim's directories
//     are made top-down from the metadata directory, not stat'ed first.
//   - Removal knows the layout, <claim>/<request>/metadata.json: one
//     listing, an unlink per file and an rmdir per directory, not
//     os.RemoveAll's failing unlink before each rmdir.
//
// Every call goes through pkg/capfile, so that it is counted
// (BenchmarkPrepareUnprepare).
func metadataFileOps(cdiDir, stagingDir, pluginDir string) kubeletplugin.MetadataFileOperations {
	base := filepath.Join(pluginDir, metadataSubDir)
	return kubeletplugin.MetadataFileOperations{
		WriteFile: func(name string, data []byte, perm os.FileMode) error {
			tmpDir := filepath.Dir(name)
			if tmpDir != filepath.Clean(cdiDir) {
				return capfile.WriteAtomic(name, data, perm, false)
			}
			err := capfile.WriteAtomicVia(stagingDir, name, data, perm, false, nil)
			if errors.Is(err, fs.ErrNotExist) {
				if err := os.MkdirAll(stagingDir, 0o755); err != nil {
					return err
				}
				err = capfile.WriteAtomicVia(stagingDir, name, data, perm, false, nil)
			}
			return err
		},
		MkdirAll: func(path string, perm os.FileMode) error {
			if filepath.Clean(path) == filepath.Clean(cdiDir) {
				return nil // WriteFile makes it again if it is gone
			}
			return mkdirUnder(base, path, perm)
		},
		RemoveAll: removeClaimMetadata,
		Remove:    capfile.Remove,
		Glob:      capfile.Glob,
	}
}

// mkdirUnder makes path and its missing parents below base, top-down:
// a claim's directories do not exist before its prepare, so each mkdir
// succeeds (or finds the directory of another request of the claim). A
// path outside base, or a base that is gone, is made by os.MkdirAll.
func mkdirUnder(base, path string, perm os.FileMode) error {
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return os.MkdirAll(path, perm)
	}
	dir := base
	for i, part := range strings.Split(rel, string(filepath.Separator)) {
		dir = filepath.Join(dir, part)
		err := capfile.Mkdir(dir, perm)
		switch {
		case err == nil:
		case i == 0 && errors.Is(err, fs.ErrNotExist):
			return os.MkdirAll(path, perm) // base is gone
		case errors.Is(err, fs.ErrExist):
			if dir == path {
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					return &os.PathError{Op: "mkdir", Path: dir, Err: errors.New("exists and is not a directory")}
				}
			}
		default:
			return err
		}
	}
	return nil
}

// removeClaimMetadata removes a claim's metadata directory (the helper's
// layout: one directory per request holding metadata.json). Anything
// else found there (a temp file a killed write left) is removed by
// os.RemoveAll; a missing directory is no error.
func removeClaimMetadata(dir string) error {
	requests, err := capfile.ReadDirNames(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return os.RemoveAll(dir)
	}
	for _, req := range requests {
		sub := filepath.Join(dir, req)
		_ = capfile.Remove(filepath.Join(sub, "metadata.json"))
		if capfile.Rmdir(sub) != nil {
			if err := os.RemoveAll(sub); err != nil {
				return err
			}
		}
	}
	if capfile.Rmdir(dir) != nil {
		return os.RemoveAll(dir)
	}
	return nil
}
