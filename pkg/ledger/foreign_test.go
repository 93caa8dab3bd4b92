// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"path/filepath"
	"strings"
	"testing"
)

// A UID another driver began to prepare and this driver then prepares
// itself (issue 58, defect 4): this driver's hold replaces the foreign
// one, and releasing the foreign claim leaves it, at run time and after a
// restart's HoldAll.
func TestOwnPrepareOfAForeignUIDKeepsItsHold(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	l := open(t, dir)
	if err := l.HoldForeign(claimOf("begun")); err != nil { // nothing recorded yet
		t.Fatal(err)
	}
	if err := l.Begin(claimOf("begun", whole("GPU-0"))); err != nil {
		t.Fatal(err)
	}
	if _, foreign := l.Foreign("begun"); foreign {
		t.Error("the UID is still foreign once this driver's prepare began")
	}
	l.ReleaseForeign("begun")
	if err := l.Begin(claimOf("other", whole("GPU-0"))); err == nil || !strings.Contains(err.Error(), "claim begun") {
		t.Fatalf("GPU 0 for another claim after the foreign release: %v, want it refused for claim begun", err)
	}

	// A restart with both known: the record's hold wins.
	l2 := New(l.store)
	if err := l2.HoldForeign(claimOf("begun")); err != nil {
		t.Fatal(err)
	}
	l2.HoldAll()
	if err := l2.Begin(claimOf("other", whole("GPU-0"))); err == nil || !strings.Contains(err.Error(), "claim begun") {
		t.Fatalf("GPU 0 for another claim after a restart: %v, want it refused for claim begun", err)
	}
}
