// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package capfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAtomicCallsAndMode: a write is one create, one rename and an
// fsync only when durable; the file gets exactly its mode; nothing is left
// beside it.
func TestWriteAtomicCallsAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, tc := range []struct {
		durable bool
		mode    os.FileMode
		want    Counts
	}{
		{durable: true, mode: 0o600, want: Counts{Open: 1, Fsync: 1, Rename: 1}},
		{durable: false, mode: 0o644, want: Counts{Open: 1, Rename: 1}},
	} {
		before := Snapshot()
		if err := WriteAtomic(path, []byte("data"), tc.mode, tc.durable); err != nil {
			t.Fatal(err)
		}
		got := Snapshot().Sub(before)
		got.Chmod = 0 // depends on the umask the test runs under
		if got != tc.want {
			t.Errorf("durable=%v: calls %+v, want %+v", tc.durable, got, tc.want)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != tc.mode {
			t.Errorf("mode %v, %v; want %v", st.Mode().Perm(), err, tc.mode)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the dir holds %d entries, want the file alone", len(entries))
	}
}

// TestWriteAtomicViaFailedCheck: a write its check refuses leaves the
// target as it was and removes its own temp file, and no other.
func TestWriteAtomicViaFailedCheck(t *testing.T) {
	dir, tmpDir := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "f")
	other := filepath.Join(tmpDir, TempPrefix+"other")
	for _, f := range []string{path, other} {
		if err := os.WriteFile(f, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refused := errors.New("refused")
	err := WriteAtomicVia(tmpDir, path, []byte("new"), 0o600, false, func(tmp string) error {
		if filepath.Dir(tmp) != tmpDir {
			t.Errorf("temp file %s is not in %s", tmp, tmpDir)
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("got %v, want the check's error", err)
	}
	if data, _ := os.ReadFile(path); string(data) != "old" {
		t.Errorf("target is %q after a refused write", data)
	}
	if entries, _ := os.ReadDir(tmpDir); len(entries) != 1 || entries[0].Name() != filepath.Base(other) {
		t.Errorf("temp dir holds %v, want another writer's temp file alone", entries)
	}
	// A missing temp dir is ErrNotExist, which callers answer by making it.
	if err := WriteAtomicVia(filepath.Join(tmpDir, "gone"), path, nil, 0o600, false, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing temp dir: %v", err)
	}
	if err := Remove(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove of a missing file: %v", err)
	}
}
