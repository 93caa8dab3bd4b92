// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package capfile

import (
	"os"
	"path/filepath"
)

// TempPrefix starts the name of a file WriteAtomic has not renamed yet;
// what a crash leaves of one may be removed by whoever lists the dir.
const TempPrefix = ".tmp-"

// WriteAtomic replaces path by data with the given mode: a temporary file
// in the same directory, fsynced when durable, then renamed over path, so
// a reader never sees a half-written file.
func WriteAtomic(path string, data []byte, mode os.FileMode, durable bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), TempPrefix)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
