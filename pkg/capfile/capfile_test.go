// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package capfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestReadCappedLimits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(path, 5); err != nil || string(data) != "12345" {
		t.Fatalf("file at the limit: %q, %v", data, err)
	}
	if _, err := Read(path, 4); err == nil || !strings.Contains(err.Error(), "5 bytes, more than the 4") {
		t.Fatalf("file over the limit: %v", err)
	}
	if _, err := Read(dir, 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A FIFO with no writer: an error at once, not a wait.
	if _, err := Read(fifo, 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("fifo: %v", err)
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.json", "a.json", "c.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := List(dir, func(n string) bool { return strings.HasSuffix(n, ".json") })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")}; !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if got, err := List(filepath.Join(dir, "missing"), func(string) bool { return true }); err != nil || got != nil {
		t.Fatalf("missing dir: %v, %v", got, err)
	}
}
