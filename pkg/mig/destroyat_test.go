// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package mig_test

import (
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
)

// TestDestroyAtChecksThePlacement: a recorded GPU instance ID that now
// names a device at another placement (or of another profile) is not
// destroyed; one at the recorded placement is.
func TestDestroyAtChecksThePlacement(t *testing.T) {
	sim, g := gpu0(t, "h100x1")
	here := placement(t, g, "1g.10gb", 0)
	inst, err := mig.Create(g.Device, here)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []mig.Placement{placement(t, g, "1g.10gb", 1), placement(t, g, "1g.20gb", 0)} {
		if err := mig.DestroyAt(g.Device, other, inst.GIID, inst.CIID); err != nil {
			t.Fatal(err)
		}
		if got := sim.MigInstanceCount(g.UUID); got != 1 {
			t.Fatalf("DestroyAt(%s at %d) destroyed the device at %s/%d", other.Profile.Name, other.Start, here.Profile.Name, here.Start)
		}
	}
	if err := mig.DestroyAt(g.Device, here, inst.GIID, inst.CIID); err != nil {
		t.Fatal(err)
	}
	if got := sim.MigInstanceCount(g.UUID); got != 0 {
		t.Fatalf("%d MIG devices left", got)
	}
}
