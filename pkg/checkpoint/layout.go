// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
)

// Dir is where the plugin keeps its records under its state directory
// (--state-dir).
func Dir(stateDir string) string { return filepath.Join(stateDir, "checkpoint") }

// Files returns the record files in dir, sorted: valid, damaged and of a
// newer format alike, without reading them; a missing dir holds none. For
// checks that a node has nothing left after unprepare.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), fileSuffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}
