// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"os"
	"path/filepath"
	"testing"
)

// Issue 47, defect 4, third read: restoreMetadata compares a kept claim's
// own metadata CDI spec (<cdi dir>/<driver>_metadata_<uid>_<request>.json)
// with what it would write before writing it again. A FIFO in its place
// (the CDI directory is every CDI user's) must not block start: it is not
// what the helper wrote, so the spec is written again over it.
// TestStartSkipsFIFOsAndHugeMetadataFiles puts its FIFOs elsewhere (a
// spec of no claim, the claim's metadata file), so it does not reach this
// read.
func TestStartSkipsFIFOInPlaceOfAClaimsMetadataSpec(t *testing.T) {
	const profile = "h100x1"
	n := newNode(t, profile)
	c := n.claim("whole", []string{"gpu-0"})
	ids := n.mustPrepare(c)
	n.stop()

	spec := filepath.Join(n.dir("cdi"), testDriver+"_metadata_"+string(c.UID)+"_gpu.json")
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("the claim's metadata CDI spec is not where expected: %v", err)
	}
	if err := os.Remove(spec); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, spec)
	startWithin30s(t, n, profile, "it blocks on a FIFO in place of a claim's metadata CDI spec")
	if again := n.mustPrepare(c); len(again) != len(ids) || again[0] != ids[0] {
		t.Fatalf("prepare after start answered %v, want %v", again, ids)
	}
	if fi, err := os.Lstat(spec); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the claim's metadata CDI spec was not written again over the FIFO: %v %v", fi, err)
	}
}
