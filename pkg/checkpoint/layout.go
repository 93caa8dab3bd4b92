// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"path/filepath"
	"strings"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// Dir is where the plugin keeps its records under its state directory
// (--state-dir).
func Dir(stateDir string) string { return filepath.Join(stateDir, "checkpoint") }

// Files returns the record files in dir, sorted: valid, damaged and of a
// newer format alike, without reading them; a missing dir holds none. For
// checks that a node has nothing left after unprepare.
func Files(dir string) ([]string, error) {
	return capfile.List(dir, func(name string) bool { return strings.HasSuffix(name, fileSuffix) })
}
