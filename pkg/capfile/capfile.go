// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package capfile reads and lists the small files the driver keeps on a
// node (checkpoint records, CDI specs, the boot ID) without trusting them:
// nothing but a regular file of bounded size is read, and a listing never
// follows into a directory. It imports nothing of the project, so that
// pkg/cdi and pkg/checkpoint can both use it.
package capfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Read reads a regular file of at most limit bytes. Anything else (a
// directory, a FIFO, a device, a huge file) is an error, never read whole.
func Read(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	// writer, and start-up with it. Reads of regular files ignore it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d it can be", path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew past %d bytes while read", path, limit)
	}
	return data, nil
}

// List returns the paths of the entries of dir that are not directories
// and whose names match, sorted; a missing dir holds none.
func List(dir string, match func(name string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && match(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
