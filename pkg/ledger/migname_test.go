// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMigNamesOfEitherFormHoldOnePlacement: a claim allocated before
// dynamic MIG names carried the GPU instance profile ID holds
// "gpu-0-mig-1g10gb-3"; a claim allocated after it asks for the same
// placement as "gpu-0-mig-1g10gb-19-3". The ledger holds by what a record
// says (parent, start, size), not by name: they conflict, before and after
// a restart, in both orders, and a neighbouring placement does not.
func TestMigNamesOfEitherFormHoldOnePlacement(t *testing.T) {
	legacy, current := place("GPU-0", 3, 1), place("GPU-0", 3, 1)
	legacy.Device, current.Device = "gpu-0-mig-1g10gb-3", "gpu-0-mig-1g10gb-19-3"
	beside := place("GPU-0", 4, 1)
	beside.Device = "gpu-0-mig-1g10gb-19-4"
	if !Of(legacy).Conflicts(Of(current)) || Of(legacy).Conflicts(Of(beside)) {
		t.Fatalf("footprints: %+v %+v %+v", Of(legacy), Of(current), Of(beside))
	}
	dir := filepath.Join(t.TempDir(), "checkpoint")
	l := open(t, dir)
	if err := l.Begin(claimOf("old", legacy)); err != nil {
		t.Fatal(err)
	}
	for _, restart := range []bool{false, true} {
		if restart {
			l = open(t, dir)
		}
		if err := l.Begin(claimOf("new", current)); err == nil || !strings.Contains(err.Error(), "claim old") {
			t.Fatalf("restart %v: %s beside the held %s: %v", restart, current.Device, legacy.Device, err)
		}
	}
	if err := l.Begin(claimOf("beside", beside)); err != nil {
		t.Fatalf("the neighbouring placement: %v", err)
	}
	if err := l.Release("old"); err != nil {
		t.Fatal(err)
	}
	if err := l.Begin(claimOf("new", current)); err != nil {
		t.Fatal(err)
	}
	if err := l.Begin(claimOf("old-again", legacy)); err == nil || !strings.Contains(err.Error(), "claim new") {
		t.Fatalf("%s beside the held %s: %v", legacy.Device, current.Device, err)
	}
}
