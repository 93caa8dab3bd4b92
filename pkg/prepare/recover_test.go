// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// getter answers claim lookups by name: a *ResourceClaim is returned, an
// error is the API's answer, and any other name is NotFound.
func getter(claims map[string]any) ClaimGetter {
	return func(_ context.Context, _, name string) (*resourceapi.ResourceClaim, error) {
		switch v := claims[name].(type) {
		case *resourceapi.ResourceClaim:
			return v, nil
		case error:
			return nil, v
		}
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	}
}

// TestRecoverSortsRecords: after a restart, a claim that no longer exists
// (deleted, or replaced by one with another UID) is unprepared, a claim the
// API cannot be asked about is kept, and a half-done prepare is rolled
// back. Each is counted in the report.
func TestRecoverSortsRecords(t *testing.T) {
	n := newNode(t, "h100x4", true)
	deleted := claim("uid-deleted", dev(n.mig(0, "1g.10gb", 0)))
	replaced := claim("uid-replaced", dev("gpu-1"))
	kept := claim("uid-kept", dev("gpu-2"))
	unknown := claim("uid-unknown", dev(n.mig(3, "2g.20gb", 2)))
	for _, c := range []*resourceapi.ResourceClaim{deleted, replaced, kept, unknown} {
		n.prepare(c)
	}
	halfway := checkpoint.PreparedClaim{UID: "uid-halfway", Namespace: "ns", Name: "claim-uid-halfway", State: checkpoint.PrepareStarted,
		Devices: []checkpoint.PreparedDevice{{Pool: testPool, Device: n.mig(3, "1g.10gb", 6), Type: "mig",
			Mig: &checkpoint.MigRecord{ParentUUID: n.uuid(3), Dynamic: true, GIID: -1, CIID: -1}}}}
	if err := n.store.Put(halfway); err != nil {
		t.Fatal(err)
	}
	successor := claim("uid-successor", dev("gpu-1"))
	successor.Name = replaced.Name

	n.restart()
	report := n.state.Recover(t.Context(), getter(map[string]any{
		replaced.Name: successor,
		kept.Name:     kept,
		unknown.Name:  errors.New("apiserver unreachable"),
	}))
	if report.Stale != 2 || report.Kept != 2 || report.RolledBack != 1 || report.UnownedMig != 0 || len(report.Problems) != 0 {
		t.Fatalf("report %+v, want 2 stale, 2 kept, 1 rolled back, no problems", report)
	}
	for _, uid := range []types.UID{"uid-deleted", "uid-replaced", "uid-halfway"} {
		n.assertGone(uid)
	}
	for _, uid := range []types.UID{"uid-kept", "uid-unknown"} {
		if rec, ok := n.store.Get(uid); !ok || rec.State != checkpoint.PrepareCompleted {
			t.Errorf("kept claim %s: record %+v, %v", uid, rec, ok)
		}
		if !n.state.specIntact(uid) {
			t.Errorf("kept claim %s lost its CDI spec", uid)
		}
	}
	// Device status is written from the claim the API server returns: at
	// start for the claim it answered for, later for the other.
	if n.status.count("uid-kept") != 1 || n.status.count("uid-unknown") != 0 {
		t.Errorf("device status written %d and %d times at start, want 1 and 0", n.status.count("uid-kept"), n.status.count("uid-unknown"))
	}
	if _, err := n.state.RemoveStale(t.Context(), getter(map[string]any{kept.Name: kept, unknown.Name: unknown})); err != nil {
		t.Fatal(err)
	}
	if n.status.count("uid-unknown") != 1 {
		t.Errorf("device status of the claim the API answered for later written %d times, want 1", n.status.count("uid-unknown"))
	}
	if n.sim.MigInstanceCount(n.uuid(0)) != 0 {
		t.Error("the deleted claim's MIG device was not destroyed")
	}
	if n.sim.MigInstanceCount(n.uuid(3)) != 1 {
		t.Error("the kept claim's MIG device on GPU 3 is gone, or another is left")
	}
	// The stale claims' GPUs are free again; the kept ones are held.
	n.prepare(claim("uid-new", dev("gpu-0"), dev("gpu-1")))
	if _, err := n.tryPrepare(claim("uid-blocked", dev("gpu-2"))); err == nil || !strings.Contains(err.Error(), "uid-kept") {
		t.Fatalf("kept claim's GPU handed out again: %v", err)
	}
}

// TestRecoverRebuildsAndCleansUp: a lost checkpoint record is rebuilt from
// the record its CDI spec carries; a spec without one is removed; a kept
// claim's deleted spec is rewritten; a MIG device no record owns is
// destroyed and its GPU leaves MIG mode.
func TestRecoverRebuildsAndCleansUp(t *testing.T) {
	n := newNode(t, "h100x2", true)
	lostRecord := claim("uid-lost-record", dev(n.mig(0, "3g.40gb", 0)))
	lostSpec := claim("uid-lost-spec", dev("gpu-1"))
	n.prepare(lostRecord)
	n.prepare(lostSpec)
	if err := n.store.Delete("uid-lost-record"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(n.cdi.SpecPath("uid-lost-spec")); err != nil {
		t.Fatal(err)
	}
	if err := n.cdi.Write("uid-orphan", []cdiDevice{{Name: "gpu-1", UUID: n.uuid(1)}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := createMig(n, n.mig(0, "1g.10gb", 6)); err != nil {
		t.Fatal(err)
	}
	if n.sim.MigInstanceCount(n.uuid(0)) != 2 {
		t.Fatal("setup: want two instances on GPU 0")
	}

	n.restart()
	report := n.state.Recover(t.Context(), getter(map[string]any{lostRecord.Name: lostRecord, lostSpec.Name: lostSpec}))
	if report.Rebuilt != 1 || report.OrphanSpecs != 1 || report.Kept != 2 || report.UnownedMig != 1 || len(report.Problems) != 0 {
		t.Fatalf("report %+v, want 1 rebuilt, 1 orphan spec, 2 kept, 1 unowned MIG destroyed", report)
	}
	if rec, ok := n.store.Get("uid-lost-record"); !ok || rec.Devices[0].Mig.GIID < 0 {
		t.Fatalf("rebuilt record %+v, %v", rec, ok)
	}
	if !n.state.specIntact("uid-lost-spec") {
		t.Fatal("kept claim's deleted CDI spec was not rewritten")
	}
	n.assertGone("uid-orphan")
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 1 {
		t.Fatalf("%d instances on GPU 0, want only the rebuilt claim's", got)
	}
	// The rebuilt claim unprepares like any other.
	n.unprepare(lostRecord)
	if n.sim.MigInstanceCount(n.uuid(0)) != 0 {
		t.Fatal("unprepare of the rebuilt claim left its MIG device")
	}
}

// TestRecoverReportsWhatItCannotUndo: a stale claim whose MIG device cannot
// be destroyed stays recorded and held; Recover does not fail, it lists
// the problem.
func TestRecoverReportsWhatItCannotUndo(t *testing.T) {
	n := newNode(t, "h100x1", true)
	stuck := claim("uid-stuck", dev(n.mig(0, "1g.10gb", 0)))
	n.prepare(stuck)
	n.restart()
	if err := n.sim.SetUnprivileged(true); err != nil {
		t.Fatal(err)
	}
	report := n.state.Recover(t.Context(), getter(nil))
	if report.Stale != 0 || len(report.Problems) == 0 || !slices.ContainsFunc(report.Problems, func(p string) bool {
		return strings.Contains(p, "Unpreparing claim that no longer exists") && strings.Contains(p, "NO_PERMISSION")
	}) {
		t.Fatalf("report %+v, want the failed unprepare listed", report)
	}
	if _, ok := n.store.Get("uid-stuck"); !ok {
		t.Fatal("record of a claim that could not be undone was dropped")
	}
	if _, err := n.tryPrepare(claim("uid-other", dev("gpu-0"))); err == nil || !strings.Contains(err.Error(), "uid-stuck") {
		t.Fatalf("GPU of an undone claim handed out: %v", err)
	}
	// Once the privilege is back, the kubelet's unprepare cleans up.
	if err := n.sim.SetUnprivileged(false); err != nil {
		t.Fatal(err)
	}
	n.unprepare(stuck)
	n.assertGone("uid-stuck")
	if n.sim.MigInstanceCount(n.uuid(0)) != 0 {
		t.Fatal("MIG device left after the retried unprepare")
	}
}
