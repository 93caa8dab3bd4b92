// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestReadOnlyChangesNothing(t *testing.T) {
	if recs, err := ReadOnly(filepath.Join(t.TempDir(), "missing")); err != nil || len(recs) != 0 {
		t.Fatalf("a missing dir: %v, %v", recs, err)
	}
	dir := t.TempDir()
	s, _, _ := Open(dir)
	if err := s.Put(PreparedClaim{UID: "good", State: PrepareCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trunc.json"), []byte(`{"version":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp-1"), []byte(`partial`), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	recs, err := ReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].UID != "good" {
		t.Fatalf("records: %+v", recs)
	}
	if after := listDir(t, dir); !slices.Equal(before, after) {
		t.Fatalf("ReadOnly changed the dir:\nbefore %v\nafter  %v", before, after)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
