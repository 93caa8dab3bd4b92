// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
)

// The hooks pkg/driver needs when a prepare is refused because another
// claim still holds the hardware (pkg/driver/staleholder.go): which claims
// hold it, whether the API still has them as recorded, and the release of
// one the API no longer has. Each is what Prepare, RemoveStale and
// Unprepare already do, exposed for one claim; none takes a lock the
// caller could be holding.

// Holders lists the prepared or half-prepared claims of this driver's
// format whose devices overlap what claim is allocated, by hardware
// (ledger.Footprint, as Begin checks). Nil when the claim cannot be
// planned: then it was not refused for a holder.
func (s *State) Holders(claim *resourceapi.ResourceClaim) []checkpoint.PreparedClaim {
	_, records, err := s.plan(claim) // touches nothing
	if err != nil {
		return nil
	}
	want := ledger.Footprints(checkpoint.PreparedClaim{Devices: records})
	var out []checkpoint.PreparedClaim
	for _, rec := range s.Ledger.Claims() {
		if rec.UID == claim.UID {
			continue
		}
		if overlapping(ledger.Footprints(rec), want) {
			out = append(out, rec)
		}
	}
	return out
}

func overlapping(held, want []ledger.Footprint) bool {
	for _, h := range held {
		for _, w := range want {
			if h.Conflicts(w) {
				return true
			}
		}
	}
	return false
}

// Stale reports whether the API no longer has rec's claim as recorded: it
// is gone, replaced (another UID), deallocated or allocated other devices.
// The same check as RemoveStale's.
func (s *State) Stale(ctx context.Context, getClaim ClaimGetter, rec checkpoint.PreparedClaim) (bool, error) {
	_, stale, err := s.isStale(ctx, getClaim, rec)
	return stale, err
}

// ReleaseStale unprepares rec's claim as the kubelet's unprepare would,
// under the same locks, if its record still holds the devices rec names
// once the claim's lock is held: a claim prepared again meanwhile (another
// allocation) is left alone. It reports whether it released the claim.
func (s *State) ReleaseStale(ctx context.Context, rec checkpoint.PreparedClaim) (bool, error) {
	return s.unprepareIf(ctx, rec.UID, func(cur checkpoint.PreparedClaim) bool {
		return sameAllocation(cur.Devices, rec.Devices)
	})
}
