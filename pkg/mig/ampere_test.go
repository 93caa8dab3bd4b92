// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package mig_test

import (
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestAmpereMigModeIsNeverChanged (defect 3): an A100 changes MIG mode only
// with a reset. The plugin neither turns it on (only an admin can) nor off
// (a disable would sit pending and take the admin's MIG mode away at the
// next reset or reboot).
func TestAmpereMigModeIsNeverChanged(t *testing.T) {
	_, g := gpu0(t, "a100-80gbx1")
	if !g.MigModeChangeNeedsReset {
		t.Fatal("an A100 must need a reset to change MIG mode")
	}
	_, err := mig.Create(g.Device, placement(t, g, "1g.10gb", 0))
	if err == nil || !strings.Contains(err.Error(), "reset") {
		t.Fatalf("Create on an A100 with MIG mode off: %v", err)
	}
	if got := mode(t, g); got != disabled {
		t.Fatalf("MIG mode %v: the plugin asked for a change", got)
	}

	sim, g := gpu0(t, "a100-80gbx1"+simulate.MigSuffix)
	inst, err := mig.Create(g.Device, placement(t, g, "3g.40gb", 4))
	if err != nil {
		t.Fatal(err)
	}
	if err := mig.Destroy(g.Device, inst.GIID, inst.CIID); err != nil {
		t.Fatal(err)
	}
	if err := mig.DisableIfEmpty(g.Device, g.MigProfiles); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, g); got != enabled {
		t.Fatalf("MIG mode %v after the last instance went", got)
	}
	if sim.MigInstanceCount(g.UUID) != 0 {
		t.Fatal("instance left")
	}
	// Nor is it used whole while in MIG mode.
	_, a100 := gpu0(t, "a100-40gbx1"+simulate.MigSuffix)
	if err := mig.RequireMigDisabled(a100.Device, a100.MigProfiles); err == nil || mode(t, a100) != enabled {
		t.Fatalf("A100 in MIG mode: %v, mode %v", err, mode(t, a100))
	}
}
