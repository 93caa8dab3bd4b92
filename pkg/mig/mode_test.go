// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package mig_test

import (
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// TestSetMigModeFailureIsAnError (defect 2): nvmlDeviceSetMigMode's own
// return code is checked. Without privileges it is NO_PERMISSION while the
// activation status (go-nvml's first value) stays SUCCESS; MIG mode is
// still on, and saying otherwise would let a whole-GPU claim run on a GPU
// in MIG mode.
func TestSetMigModeFailureIsAnError(t *testing.T) {
	sim, g := gpu0(t, migOnNode)
	if err := sim.SetUnprivileged(true); err != nil {
		t.Fatal(err)
	}
	err := mig.DisableIfEmpty(g.Device, g.MigProfiles)
	if err == nil || !strings.Contains(err.Error(), "NO_PERMISSION") {
		t.Fatalf("DisableIfEmpty without privileges: %v", err)
	}
	if got := mode(t, g); got != enabled {
		t.Fatalf("MIG mode %v", got)
	}
	// Turning MIG mode on fails the same way, before any instance is tried.
	sim, g = gpu0(t, "h100x1")
	_ = sim.SetUnprivileged(true)
	if _, err := mig.Create(g.Device, placement(t, g, "1g.10gb", 0)); err == nil || !strings.Contains(err.Error(), "set MIG mode enabled: ERROR_NO_PERMISSION") {
		t.Fatalf("Create without privileges: %v", err)
	}
}

// TestPendingMigModeIsNotActive (defect 2): a change another client keeps
// pending is not a success, and a pending change the plugin no longer wants
// is withdrawn rather than left to take effect later.
func TestPendingMigModeIsNotActive(t *testing.T) {
	sim, g := gpu0(t, "h100x1")
	_ = sim.SetInUse(g.UUID, true)
	if _, err := mig.Create(g.Device, placement(t, g, "1g.10gb", 0)); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("Create while another client holds the GPU: %v", err)
	}
	if sim.MigInstanceCount(g.UUID) != 0 {
		t.Fatal("an instance was created")
	}
	if got := mode(t, g); got != [2]int{off, on} {
		t.Fatalf("MIG mode %v, want the enable pending", got)
	}
	// The claim is gone and the GPU goes back to whole use: the pending
	// enable must not take effect when the other client lets go.
	if err := mig.DisableIfEmpty(g.Device, g.MigProfiles); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, g); got != disabled {
		t.Fatalf("MIG mode %v: the pending enable was left in place", got)
	}
}

// TestWholeGPUNeedsMigModeOff (defect 2): a disable another client keeps
// pending lets unprepare succeed, but not a whole-GPU prepare; neither does
// a refused one.
func TestWholeGPUNeedsMigModeOff(t *testing.T) {
	sim, g := gpu0(t, "h100x1")
	inst, err := mig.Create(g.Device, placement(t, g, "1g.10gb", 0))
	if err != nil {
		t.Fatal(err)
	}
	_ = sim.SetInUse(g.UUID, true)
	if err := mig.Destroy(g.Device, inst.GIID, inst.CIID); err != nil {
		t.Fatal(err)
	}
	if err := mig.DisableIfEmpty(g.Device, g.MigProfiles); err != nil {
		t.Fatalf("unprepare with the disable pending: %v", err)
	}
	if err := mig.RequireMigDisabled(g.Device, g.MigProfiles); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Fatalf("whole-GPU use with the disable pending: %v", err)
	}
	_ = sim.SetInUse(g.UUID, false)
	_ = sim.SetUnprivileged(true)
	if err := mig.RequireMigDisabled(g.Device, g.MigProfiles); err == nil || !strings.Contains(err.Error(), "NO_PERMISSION") {
		t.Fatalf("whole-GPU use without privileges: %v", err)
	}
	_ = sim.SetUnprivileged(false)
	if err := mig.RequireMigDisabled(g.Device, g.MigProfiles); err != nil || mode(t, g) != disabled {
		t.Fatalf("after the client let go: %v, mode %v", err, mode(t, g))
	}
}

// TestCreateReportsGPUInstanceIDs: the IDs recorded for a MIG device are
// the driver's, found again by ExistingMigDevices.
func TestCreateReportsGPUInstanceIDs(t *testing.T) {
	_, g := gpu0(t, "h100x1")
	inst, err := mig.Create(g.Device, placement(t, g, "2g.20gb", 4))
	if err != nil {
		t.Fatal(err)
	}
	if inst.GIID != 5 || inst.CIID != 0 || !strings.HasPrefix(inst.UUID, "MIG-") {
		t.Fatalf("instance %+v", inst)
	}
	existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles)
	if err != nil || len(existing) != 1 || existing[0].UUID != inst.UUID || existing[0].Profile.Name != "2g.20gb" {
		t.Fatalf("existing %+v, %v", existing, err)
	}
}
