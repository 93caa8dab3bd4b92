// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// A pod deleted with grace 0 or forced: its claim is gone from the API (or
// deallocated) before the kubelet's unprepare of it reaches the plugin,
// and the replacement's claim is allocated the same GPU (issue 55, defect
// 5; staleholder.go).

// goneFromAPI makes the API no longer have c as allocated on its device.
func goneFromAPI(t *testing.T, n *node, c *resourceapi.ResourceClaim, how string) {
	t.Helper()
	ctx := context.Background()
	claims := n.client.ResourceV1().ResourceClaims(c.Namespace)
	switch how {
	case "deleted":
		if err := claims.Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	case "deallocated", "reallocated":
		cur, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status.Allocation = nil
		if how == "reallocated" {
			cur.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: testDriver, Pool: testNode, Device: "gpu-5"},
			}}}
		}
		if _, err := claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown way %q", how)
	}
}

// TestStaleHolderUnprepareArrivesLate: the old claim is gone from the API
// and its unprepare comes 1 s after the new claim's prepare: the new
// prepare waits for it and succeeds, without an error for the kubelet to
// back off on.
func TestStaleHolderUnprepareArrivesLate(t *testing.T) {
	for _, how := range []string{"deleted", "deallocated", "reallocated"} {
		t.Run(how, func(t *testing.T) {
			n := newNode(t, "h100x8")
			old := n.claim("old", []string{"gpu-0"})
			n.mustPrepare(old) // its pod ran: the kubelet was answered in full
			goneFromAPI(t, n, old, how)
			next := n.claim("next", []string{"gpu-0"})

			late := make(chan error, 1)
			go func() {
				time.Sleep(time.Second)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				answers, err := n.in.UnprepareClaims(ctx, old)
				if err == nil && answers[string(old.UID)].GetError() != "" {
					err = errors.New(answers[string(old.UID)].GetError())
				}
				late <- err
			}()
			start := time.Now()
			r := n.prepare(next)[string(next.UID)]
			took := time.Since(start)
			if r.GetError() != "" {
				t.Fatalf("prepare of the replacement's claim: %s", r.GetError())
			}
			if len(r.Devices) != 1 || r.Devices[0].DeviceName != "gpu-0" {
				t.Fatalf("replacement prepared %+v, want gpu-0", r.Devices)
			}
			if err := <-late; err != nil {
				t.Fatalf("late unprepare of the old claim: %v", err)
			}
			// Prepared once the old claim was unprepared, not before.
			if took < time.Second {
				t.Fatalf("replacement prepared after %s, before the old claim's unprepare", took)
			}
			if _, err := os.Stat(n.specPath(next)); err != nil {
				t.Fatalf("replacement's CDI spec: %v", err)
			}
		})
	}
}

// TestLiveHolderRefusedPromptly: a holder the API still has allocated on
// the device keeps it, and the other claim is refused at once, as before.
func TestLiveHolderRefusedPromptly(t *testing.T) {
	n := newNode(t, "h100x8")
	n.mustPrepare(n.claim("holder", []string{"gpu-0"}))
	start := time.Now()
	r := n.prepare(n.claim("other", []string{"gpu-0"}))["uid-other"]
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("refusal took %s", took)
	}
	if !strings.Contains(r.GetError(), "already prepared for claim uid-holder") {
		t.Fatalf("other claim on gpu-0: %+v", r)
	}
	if _, err := os.Stat(n.specPath(n.claimObj("holder"))); err != nil {
		t.Fatalf("holder's CDI spec: %v", err)
	}
}

// TestNeverStartedStaleHolderReleased: the old pod never started (its
// other claim was refused), so the kubelet releases its prepared claim
// only in its periodic clean-up. No container can have used that claim,
// so once the API no longer has it, the next claim on its GPU gets it at
// once; the kubelet's unprepare, when it comes, finds nothing to do.
func TestNeverStartedStaleHolderReleased(t *testing.T) {
	n := newNode(t, "h100x8")
	n.mustPrepare(n.claim("blocker", []string{"gpu-1"}))
	oldA := n.claim("old-a", []string{"gpu-0"})
	oldB := n.claim("old-b", []string{"gpu-1"})
	res := n.prepare(oldA, oldB)
	if res[string(oldA.UID)].GetError() != "" || res[string(oldB.UID)].GetError() == "" {
		t.Fatalf("want old-a prepared and old-b refused: %+v", res)
	}
	goneFromAPI(t, n, oldA, "deleted")
	goneFromAPI(t, n, oldB, "deleted")

	next := n.claim("next", []string{"gpu-0"})
	start := time.Now()
	r := n.prepare(next)[string(next.UID)]
	if r.GetError() != "" {
		t.Fatalf("prepare of the replacement's claim: %s", r.GetError())
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("replacement prepared after %s; the unused claim should go at once", took)
	}
	if _, err := os.Stat(n.specPath(oldA)); !os.IsNotExist(err) {
		t.Errorf("released claim's CDI spec still there: %v", err)
	}
	n.unprepare(oldA, oldB) // the kubelet's clean-up, later
	if _, err := os.Stat(n.specPath(next)); err != nil {
		t.Fatalf("replacement's CDI spec after the old claim's late unprepare: %v", err)
	}
	if r := n.prepare(n.claim("intruder", []string{"gpu-0"}))["uid-intruder"]; !strings.Contains(r.GetError(), "already prepared for claim uid-next") {
		t.Fatalf("gpu-0 handed to another claim beside the replacement's: %+v", r)
	}
	// The blocker, which the API still has, kept its GPU throughout.
	if r := n.prepare(n.claim("second", []string{"gpu-1"}))["uid-second"]; !strings.Contains(r.GetError(), "already prepared for claim uid-blocker") {
		t.Fatalf("gpu-1 of the live blocker: %+v", r)
	}
}

// TestUsedStaleHolderKept: a holder whose pod may have run (answered in
// full) is never released by the plugin: without its unprepare the new
// claim is refused once the wait is over, and the old claim keeps its GPU.
func TestUsedStaleHolderKept(t *testing.T) {
	n := newNode(t, "h100x8")
	n.staleWait = 700 * time.Millisecond
	n.restart("h100x8")
	old := n.claim("old", []string{"gpu-0"})
	n.mustPrepare(old)
	goneFromAPI(t, n, old, "deleted")
	start := time.Now()
	r := n.prepare(n.claim("next", []string{"gpu-0"}))["uid-next"]
	took := time.Since(start)
	if !strings.Contains(r.GetError(), "already prepared for claim uid-old") || !strings.Contains(r.GetError(), "no unprepare of it came") {
		t.Fatalf("replacement's claim while the old one is held: %+v", r)
	}
	if took < 700*time.Millisecond || took > 5*time.Second {
		t.Errorf("refused after %s, want the wait of 700ms", took)
	}
	if _, err := os.Stat(n.specPath(old)); err != nil {
		t.Fatalf("old claim's CDI spec: %v", err)
	}
}

// TestStaleHolderWaitBoundedByCall: the wait ends well before the caller's
// deadline, so that the kubelet gets the answer, not a timeout.
func TestStaleHolderWaitBoundedByCall(t *testing.T) {
	d := &Driver{cfg: Config{}}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if left := time.Until(d.staleDeadline(ctx)); left > 8*time.Second-staleCallMargin {
		t.Errorf("wait ends %s from now, within %s of the caller's deadline", left, staleCallMargin)
	}
	if left := time.Until(d.staleDeadline(context.Background())); left > DefaultStaleHolderWait || left < DefaultStaleHolderWait-time.Second {
		t.Errorf("without a deadline the wait is %s, want %s", left, DefaultStaleHolderWait)
	}
}

// TestClaimUseInFlightAfterRelease: a claim released as unused while a
// call that prepares it is in flight is answered with an error by that
// call (its answer may be from the released record), and counted neither
// as used nor as unused; a later call prepares it afresh.
func TestClaimUseInFlightAfterRelease(t *testing.T) {
	u := newClaimUse()
	a := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"}}
	b := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "uid-b"}}
	ok := kubeletplugin.PrepareResult{}
	refused := kubeletplugin.PrepareResult{Err: errors.New("refused")}

	first := u.begin()
	u.finish(first, []*resourceapi.ResourceClaim{a, b}, map[types.UID]kubeletplugin.PrepareResult{a.UID: ok, b.UID: refused})
	if u.takeUnused(b.UID) {
		t.Fatal("a refused claim taken as prepared")
	}
	inFlight := u.begin()
	if !u.takeUnused(a.UID) {
		t.Fatal("claim answered only beside a refused one not taken as unused")
	}
	out := map[types.UID]kubeletplugin.PrepareResult{a.UID: ok}
	u.finish(inFlight, []*resourceapi.ResourceClaim{a}, out)
	if out[a.UID].Err == nil {
		t.Fatal("call in flight during the release answered the released claim as prepared")
	}
	if u.takeUnused(a.UID) {
		t.Fatal("released claim taken again")
	}
	later := u.begin()
	out = map[types.UID]kubeletplugin.PrepareResult{a.UID: ok}
	u.finish(later, []*resourceapi.ResourceClaim{a}, out)
	if out[a.UID].Err != nil {
		t.Fatalf("later prepare refused: %v", out[a.UID].Err)
	}
	if u.takeUnused(a.UID) {
		t.Fatal("claim answered in full taken as unused")
	}
}
