// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Issue 47, defect 4: the device metadata files and their CDI specs are
// read at start from directories the plugin does not own alone (the CDI
// directory is the container runtime's and every CDI user's). A FIFO where
// a metadata spec or file is expected, or a file far larger than any the
// helper writes, is skipped: start never blocks on it nor reads it whole,
// as every other start-up read (pkg/capfile).
func TestStartSkipsFIFOsAndHugeMetadataFiles(t *testing.T) {
	const profile = "h100x1"
	n := newNode(t, profile)
	c := n.claim("whole", []string{"gpu-0"})
	ids := n.mustPrepare(c)
	n.stop()

	// A FIFO among <cdi dir>/<driver>_metadata_*.json (sweepMetadata reads
	// each), one in place of the claim's metadata file (restoreMetadata
	// reads it), and a huge file that looks like a metadata spec.
	specFIFO := filepath.Join(n.dir("cdi"), testDriver+"_metadata_fifo_gpu.json")
	file := filepath.Join(n.dir("plugin"), metadataSubDir, c.Namespace+"_"+c.Name, "gpu", "metadata.json")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, specFIFO)
	mkfifo(t, file)
	huge := filepath.Join(n.dir("cdi"), testDriver+"_metadata_huge_gpu.json")
	if err := os.WriteFile(huge, []byte(`{"cdiVersion":"0.6.0","kind":"`+testDriver+`/metadata","devices":[{"name":"huge_gpu"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<30); err != nil { // sparse: 1 GiB of NULs after the JSON
		t.Fatal(err)
	}

	startWithin30s(t, n, profile, "it blocks on a FIFO in the CDI or plugin directory")
	// The claim is served as before; what is not a file the helper
	// wrote is left where it is.
	if again := n.mustPrepare(c); len(again) != len(ids) || again[0] != ids[0] {
		t.Fatalf("prepare after start answered %v, want %v", again, ids)
	}
	for _, p := range []string{specFIFO, file, huge} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// mkfifo makes a FIFO at path, and on cleanup opens it for writing so
// that a reader blocked on it (the defect) ends.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// startWithin30s starts the node's plugin and fails the test, saying
// why, if start does not return within 30 s.
func startWithin30s(t *testing.T, n *node, profile, why string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.start(profile)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("start did not return within 30s: " + why)
	}
}
