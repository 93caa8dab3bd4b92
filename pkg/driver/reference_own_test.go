// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
)

// A claim NVIDIA's plugin had only begun to prepare (ref-c, PrepareStarted)
// is asked of this plugin again by the kubelet, which was never told it is
// prepared, and this plugin prepares it itself (a MIG device at slice 2 of
// GPU 0). Its release as NVIDIA's claim must leave this plugin's own
// prepare alone (issue 58, defect 4).

// beginOwnPrepareOfBegunClaim starts the plugin with the release of the
// begun claim failing (its released list cannot be written), so that it
// is still held when the kubelet prepares it, and prepares it.
func beginOwnPrepareOfBegunClaim(t *testing.T, r *referenceNode) *Driver {
	t.Helper()
	blocker := filepath.Join(r.in.Dir("plugin"), refdriver.ReleasedFile+".tmp")
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startReference(t, r)
	uid := types.UID(r.claims["ref-c"].UID)
	if !isHeld(d.ref.Load(), uid) {
		t.Fatal("the begun claim was released although its release could not be recorded")
	}
	answers, err := r.in.PrepareClaims(context.Background(), r.claimObj(t, "ref-c"))
	if err != nil || answers[string(uid)].GetError() != "" {
		t.Fatalf("this plugin's prepare of ref-c: %v %v", err, answers[string(uid)].GetError())
	}
	if _, ok := d.state.Ledger.Get(uid); !ok {
		t.Fatal("no record of this plugin's prepare of ref-c")
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOwnPrepareOfBegunReferenceClaimKeepsItsHold: on main the release of
// the begun claim as NVIDIA's (at start, or its poll) dropped this
// plugin's hold of the UID too, and a restart's holds did the same, so
// the MIG slice it prepared was handed to another claim.
func TestOwnPrepareOfBegunReferenceClaimKeepsItsHold(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := beginOwnPrepareOfBegunClaim(t, r)
	ctx := context.Background()
	uid := types.UID(r.claims["ref-c"].UID)
	if err := d.ref.Load().release(ctx, uid, "test: the start's release, after this plugin's prepare"); err != nil {
		t.Fatal(err)
	}
	other := allocated("other", "gpu-0-mig-1g10gb-19-2")
	if _, err := r.in.Prepare(ctx, other); err == nil || !strings.Contains(err.Error(), string(uid)) {
		t.Fatalf("prepare of ref-c's device for another claim once NVIDIA's part is released: %v, want it refused for %s", err, uid)
	}

	// After a restart too: NVIDIA's checkpoint still lists ref-c (this
	// time its release is not recorded) beside this plugin's own record.
	d.Stop()
	restartWithBegunClaimHeld(t, r)
	answers, err := r.in.PrepareClaims(ctx, r.claimObj(t, "other"))
	if err != nil {
		t.Fatal(err)
	}
	if msg := answers[string(other.UID)].GetError(); !strings.Contains(msg, string(uid)) {
		t.Errorf("after a restart, prepare of ref-c's device for another claim: %q, want it refused for %s", msg, uid)
	}
}

// restartWithBegunClaimHeld restarts the plugin with NVIDIA's checkpoint
// listing ref-c unreleased and its release failing again.
func restartWithBegunClaimHeld(t *testing.T, r *referenceNode) {
	t.Helper()
	if err := os.Remove(filepath.Join(r.in.Dir("plugin"), refdriver.ReleasedFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(r.in.Dir("plugin"), refdriver.ReleasedFile+".tmp", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startReference(t, r)
	if !isHeld(d.ref.Load(), types.UID(r.claims["ref-c"].UID)) {
		t.Fatal("ref-c not listed again")
	}
}

// TestOwnPrepareOfBegunReferenceClaimIsUnpreparedWhole: on main the
// kubelet's unprepare of such a claim was answered by the take-over alone:
// NVIDIA's part released, this plugin's record, MIG device and CDI spec
// left behind.
func TestOwnPrepareOfBegunReferenceClaimIsUnpreparedWhole(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := beginOwnPrepareOfBegunClaim(t, r)
	ctx := context.Background()
	uid := types.UID(r.claims["ref-c"].UID)
	sim := d.cfg.Backend.Simulator
	if n := sim.MigInstanceCount(r.migGPU); n != 2 {
		t.Fatalf("%d MIG devices on GPU 0, want ref-a's and this plugin's for ref-c", n)
	}
	if err := r.in.Unprepare(ctx, r.claimObj(t, "ref-c")); err != nil {
		t.Fatalf("unprepare of ref-c: %v", err)
	}
	if _, ok := d.state.Ledger.Get(uid); ok {
		t.Error("this plugin's record of ref-c is left after its unprepare")
	}
	if n := sim.MigInstanceCount(r.migGPU); n != 1 {
		t.Errorf("%d MIG devices on GPU 0 after ref-c's unprepare, want ref-a's only", n)
	}
	spec := filepath.Join(r.in.CDIDir(), "k8s."+testDriver+"-claim_"+string(uid)+".json")
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Errorf("this plugin's CDI spec of ref-c is left: %v", err)
	}
	if isHeld(d.ref.Load(), uid) {
		t.Error("ref-c is still held as NVIDIA's")
	}
	if _, err := r.in.Prepare(ctx, allocated("after", "gpu-0-mig-1g10gb-19-2")); err != nil {
		t.Errorf("prepare of ref-c's device once it is unprepared: %v", err)
	}
}

// TestReferenceTakeoverLeavesThePath (issue 58, item 4): the take-over is
// a one-time event of a node. On main every claim went through it for
// the plugin's lifetime; now the driver calls it only while something of
// NVIDIA's is held, and drops it with the last release.
func TestReferenceTakeoverLeavesThePath(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := startReference(t, r)
	ctx := context.Background()
	if d.ref.Load() == nil {
		t.Fatal("no take-over while NVIDIA's claims are held")
	}
	for _, name := range []string{"ref-b", "ref-a"} {
		if err := r.in.Unprepare(ctx, r.claimObj(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	if d.ref.Load() != nil {
		t.Error("the take-over is still in the prepare and unprepare path once nothing of NVIDIA's is held")
	}
	// The driver serves as usual without it; the readiness is its own.
	c := allocated("later", "gpu-1")
	if _, err := r.in.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := r.in.Unprepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := d.ref.Load().NotReady(); err != nil {
		t.Errorf("readiness: %v", err)
	}

	// A node whose checkpoint is of an earlier boot never wires it in.
	r2 := newReferenceNode(t, "h100x2")
	r2.editV2(t, func(v2 map[string]any) { v2["nodeBootID"] = "0f0e0d0c-0000-4000-8000-000000000000" })
	if d2 := startReference(t, r2); d2.ref.Load() != nil {
		t.Error("the take-over is wired in for a checkpoint of an earlier boot")
	}
}

// isHeld reports whether the take-over holds uid as NVIDIA's claim.
func isHeld(tk *referenceTakeover, uid types.UID) bool {
	if tk == nil {
		return false
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	_, ok := tk.held[uid]
	return ok
}
