// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// TestUsageOfLegacyMigNames: a claim allocated before dynamic MIG names
// carried the profile ID ("gpu-0-mig-1g10gb-3") holds its device under that
// name after the upgrade, when the node publishes it as
// gpu-0-mig-1g10gb-19-3; `gpudra usage` still shows it holding that MIG
// device.
func TestUsageOfLegacyMigNames(t *testing.T) {
	s := demoFleet(t)
	renamed := 0
	for i := range s.Claims {
		for j := range s.Claims[i].Status.Allocation.Devices.Results {
			r := &s.Claims[i].Status.Allocation.Devices.Results[j]
			if legacy, ok := deviceattr.LegacyMigDeviceName(r.Device); ok {
				r.Device = legacy
				renamed++
			}
		}
	}
	if renamed != 2 {
		t.Fatalf("renamed %d MIG devices of the demo's claims, want 2", renamed)
	}
	u := byUse(Usage(s, Filter{}))
	if len(u[MIG]) != 1 || len(u[MIG][0].Holders) != 2 {
		t.Fatalf("MIG GPUs %+v, want one with both devices of the claim", u[MIG])
	}
	for _, h := range u[MIG][0].Holders {
		if h.Claim != "team-a/mig" || h.Profile == "" || h.Size == 0 {
			t.Errorf("holder %+v, want team-a/mig with its profile and placement", h)
		}
		if n, ok := deviceattr.ParseMigDeviceName(h.Device); !ok || n.GIProfileID != -1 {
			t.Errorf("holder's device %q, want the name the claim was allocated", h.Device)
		}
	}
}
