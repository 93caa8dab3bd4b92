// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"strings"
	"testing"
)

// TestOverlapWithinOneClaim: a claim that names one GPU's hardware twice
// is refused before anything is touched.
func TestOverlapWithinOneClaim(t *testing.T) {
	n := newNode(t, "h100x2", true)
	for name, c := range map[string]struct {
		results []result
		want    string
	}{
		"whole GPU and its MIG device": {[]result{dev("gpu-0"), dev(n.mig(0, "1g.10gb", 6))}, "use the same GPU hardware"},
		"nested placements":            {[]result{dev(n.mig(0, "7g.80gb", 0)), dev(n.mig(0, "1g.10gb", 3))}, "use the same GPU hardware"},
		"partly overlapping":           {[]result{dev(n.mig(0, "3g.40gb", 4)), dev(n.mig(0, "2g.20gb", 4))}, "use the same GPU hardware"},
		"one device twice":             {[]result{dev("gpu-1"), {request: "other", device: "gpu-1"}}, "allocated twice"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := n.tryPrepare(claim("uid-x", c.results...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			n.assertGone("uid-x")
			if n.sim.MigInstanceCount(n.uuid(0)) != 0 {
				t.Fatal("a refused claim created MIG devices")
			}
		})
	}
	// Disjoint placements of one GPU, and a device on another, are fine.
	n.prepare(claim("uid-ok", dev(n.mig(0, "1g.10gb", 0)), dev(n.mig(0, "1g.10gb", 1)), dev(n.mig(0, "3g.40gb", 4)), dev("gpu-1")))
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 3 {
		t.Fatalf("%d GPU instances, want 3", got)
	}
}

// TestOverlapAcrossClaims: a prepared claim keeps every other claim off its
// hardware until it is unprepared; the error names the holder.
func TestOverlapAcrossClaims(t *testing.T) {
	n := newNode(t, "h100x2", true)
	holder := claim("uid-a", dev("gpu-0"), dev(n.mig(1, "3g.40gb", 0)))
	n.prepare(holder)
	for name, c := range map[string]struct {
		device string
		want   string
	}{
		"same whole GPU":            {"gpu-0", "device gpu-0 is already prepared for claim uid-a"},
		"MIG device of held GPU":    {n.mig(0, "1g.10gb", 2), "shares GPU hardware with device gpu-0, already prepared for claim uid-a"},
		"whole GPU of held MIG":     {"gpu-1", "already prepared for claim uid-a"},
		"placement inside the held": {n.mig(1, "1g.10gb", 2), "already prepared for claim uid-a"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := n.tryPrepare(claim("uid-b", dev(c.device)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			n.assertGone("uid-b")
		})
	}
	// The other half of GPU 1 is free.
	free := claim("uid-c", dev(n.mig(1, "3g.40gb", 4)))
	n.prepare(free)
	// Admin access monitors a device and never conflicts.
	n.prepare(claim("uid-admin", result{request: "gpu", device: "gpu-0", admin: true}))
	n.unprepare(holder)
	n.prepare(claim("uid-b", dev(n.mig(0, "1g.10gb", 2))))
	// GPU 1 is still half used: a whole-GPU claim on it must wait for uid-c.
	if _, err := n.tryPrepare(claim("uid-d", dev("gpu-1"))); err == nil || !strings.Contains(err.Error(), "uid-c") {
		t.Fatalf("whole GPU 1 while uid-c holds half of it: %v", err)
	}
}

// TestRestartKeepsReservations: after a restart, Recover holds the devices
// of kept claims, so that a conflicting claim is still refused.
func TestRestartKeepsReservations(t *testing.T) {
	n := newNode(t, "h100x1", true)
	kept := claim("uid-a", dev(n.mig(0, "4g.40gb", 0)))
	n.prepare(kept)
	n.restart()
	report := n.state.Recover(t.Context(), getter(map[string]any{kept.Name: kept}))
	if report.Kept != 1 || len(report.Problems) != 0 {
		t.Fatalf("report %+v", report)
	}
	if _, err := n.tryPrepare(claim("uid-b", dev(n.mig(0, "2g.20gb", 2)))); err == nil || !strings.Contains(err.Error(), "uid-a") {
		t.Fatalf("conflicting claim after restart: %v", err)
	}
	n.prepare(claim("uid-c", dev(n.mig(0, "3g.40gb", 4))))
}
