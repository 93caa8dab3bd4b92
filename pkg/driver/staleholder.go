// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
)

// A pod deleted with grace 0, or force-deleted, is gone from the API, and
// its claim deallocated, before the kubelet's NodeUnprepareResources for it
// reaches the plugin (kubernetes#131513, #141471). The scheduler then puts
// the next claim on the same device, and its prepare is refused: the
// device is still held. Refused, the new pod waits on the kubelet's
// growing back-off; and where the old pod never started (another of its
// claims failed), the kubelet releases its claims only in its periodic
// clean-up, every 60 s (defaultReconcilePeriod, k8s.io/kubernetes
// pkg/kubelet/cm/dra/manager.go reconcileLoop), so the next pod waited 90 s
// and more.
//
// So a prepare refused because its hardware is held by claims the API no
// longer has as recorded (prepare.State.Stale: gone, replaced,
// deallocated or allocated other devices) is not answered at once:
//
//   - A holder that no container can have used is released here, as the
//     kubelet's unprepare would release it: one prepared by this process
//     only in calls where another claim failed. The kubelet starts a pod's
//     containers only after a NodePrepareResources in which every claim it
//     sent succeeded (prepareResources marks claims prepared only then,
//     and the retry sends every claim not marked), so such a claim's CDI
//     devices were never given to a container. Unknown (prepared before
//     this start) counts as used.
//   - Any other holder keeps its hardware until its unprepare comes: the
//     prepare waits for it, bounded, then tries again. The kubelet
//     unprepares a pod's claims once its containers have stopped
//     (SyncTerminatingPod, k8s.io/kubernetes pkg/kubelet/kubelet.go), a
//     few seconds after a deletion with grace 0.
//
// A holder the API still has, or one the API cannot tell about, is refused
// at once, as before: a live claim keeps its device, and nothing is ever
// prepared twice (the ledger's Begin decides, as on every prepare).
//
// The kubelet's PodResources API cannot prove the first case: it lists the
// pods of the kubelet's pod manager, and a force-deleted pod leaves it
// (HandlePodRemoves) before its containers are killed.
//
// The wait holds no lock: State.Prepare has returned and released the
// fence, the claim's and the GPUs' locks, so the unprepare it waits for
// takes them as usual (docs/architecture.md, lock order).

// DefaultStaleHolderWait bounds how long one NodePrepareResources call
// waits for the unprepare of claims the API no longer has. The kubelet
// gives each call 45 s (defaultClientCallTimeout, k8s.io/kubernetes
// pkg/kubelet/cm/dra/plugin/dra_plugin.go); the rest is left for the
// prepare itself and the answer.
const DefaultStaleHolderWait = 20 * time.Second

// staleCallMargin is kept free before the caller's deadline.
const staleCallMargin = 5 * time.Second

// stalePoll is how often a waiting prepare looks again without being
// woken: claims released by the background reconciliation (removeStale)
// wake nobody.
const stalePoll = time.Second

// claimUse is what the kubelet was told about the claims prepared by this
// process: whether each was answered in a call where every claim
// succeeded, and which were released here as never used.
type claimUse struct {
	mu sync.Mutex
	// seq numbers the prepare calls, so that a call in flight when a
	// claim was released here is told apart from a later one.
	seq uint64
	// served: present for each claim prepared by this process; true once
	// it was answered in a call where every claim succeeded.
	served map[types.UID]bool
	// released: claims released here, with the seq of the last call begun
	// before; that call's answer for them is turned into an error.
	released map[types.UID]uint64
	// wake is closed, and replaced, whenever a claim is unprepared.
	wake chan struct{}
}

func newClaimUse() *claimUse {
	return &claimUse{served: map[types.UID]bool{}, released: map[types.UID]uint64{}, wake: make(chan struct{})}
}

// begin numbers a prepare call.
func (u *claimUse) begin() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seq++
	return u.seq
}

// finish records a call's answers before the kubelet gets them. A claim
// released here since the call began is answered with an error: the
// answer may come from the record just released, and the kubelet's retry
// prepares it afresh.
func (u *claimUse) finish(call uint64, claims []*resourceapi.ResourceClaim, out map[types.UID]kubeletplugin.PrepareResult) {
	u.mu.Lock()
	defer u.mu.Unlock()
	all := true
	for _, c := range claims {
		r := out[c.UID]
		if r.Err == nil {
			if at, ok := u.released[c.UID]; ok {
				if call <= at {
					r = kubeletplugin.PrepareResult{Err: fmt.Errorf("prepare claim %s/%s: released as no longer allocated while this call was in flight; retry", c.Namespace, c.Name)}
					out[c.UID] = r
				} else {
					delete(u.released, c.UID) // prepared afresh
				}
			}
		}
		all = all && r.Err == nil
	}
	for _, c := range claims {
		if out[c.UID].Err == nil {
			u.served[c.UID] = u.served[c.UID] || all
		}
	}
}

// takeUnused reports whether uid was prepared by this process and never
// answered in a call where every claim succeeded; then it is marked
// released, so that a call in flight does not hand it out.
func (u *claimUse) takeUnused(uid types.UID) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if served, ok := u.served[uid]; !ok || served {
		return false
	}
	delete(u.served, uid)
	u.released[uid] = u.seq
	return true
}

// untake undoes takeUnused after a release that did not happen.
func (u *claimUse) untake(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.served[uid]; !ok {
		u.served[uid] = false
	}
}

// forget drops an unprepared claim and wakes the waiting prepares.
func (u *claimUse) forget(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.served, uid)
	delete(u.released, uid)
	u.wakeLocked()
}

func (u *claimUse) wakeLocked() {
	close(u.wake)
	u.wake = make(chan struct{})
}

// woken is closed at the next unprepare.
func (u *claimUse) woken() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.wake
}

// staleDeadline is when a call's waits for stale holders end.
func (d *Driver) staleDeadline(ctx context.Context) time.Time {
	wait := d.cfg.StaleHolderWait
	if wait == 0 {
		wait = DefaultStaleHolderWait
	}
	end := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-staleCallMargin).Before(end) {
		end = dl.Add(-staleCallMargin)
	}
	return end
}

// prepareClaim prepares one claim; refused for hardware that claims the
// API no longer has still hold, it releases those no container used and
// waits until deadline for the unprepare of the others.
func (d *Driver) prepareClaim(ctx context.Context, claim *resourceapi.ResourceClaim, deadline time.Time) ([]kubeletplugin.Device, error) {
	logger := klog.FromContext(ctx)
	var since time.Time // when the wait began
	for {
		woken := d.use.woken() // before the attempt: no unprepare is missed
		devices, err := d.state.Prepare(ctx, claim)
		if err == nil || d.cfg.StaleHolderWait < 0 {
			if err == nil && !since.IsZero() {
				logger.Info("Prepared claim once the claims that held its devices were unprepared", "claim", klog.KObj(claim), "waited", time.Since(since))
			}
			return devices, err
		}
		holders := d.state.Holders(claim)
		if len(holders) == 0 {
			return nil, err // refused for another reason
		}
		stale, checkErr := d.allStale(ctx, holders, deadline)
		if !stale {
			if checkErr != nil {
				logger.Error(checkErr, "Cannot tell whether the claims holding the devices are still allocated; refusing", "claim", klog.KObj(claim))
			}
			return nil, err // a live holder keeps its devices
		}
		if d.releaseUnused(ctx, holders) {
			continue
		}
		if since.IsZero() {
			since = time.Now()
			logger.Info("Devices held by claims the API no longer has; waiting for their unprepare", "claim", klog.KObj(claim), "holders", describe(holders), "until", deadline)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w; the API no longer has %s as allocated, but no unprepare of it came within %s", err, describe(holders), time.Since(since).Round(time.Millisecond))
		}
		select {
		case <-woken:
		case <-time.After(min(left, stalePoll)):
		case <-ctx.Done():
			return nil, err
		}
	}
}

// allStale reports whether the API no longer has any of holders as
// recorded; the error says why it could not tell.
func (d *Driver) allStale(ctx context.Context, holders []checkpoint.PreparedClaim, deadline time.Time) (bool, error) {
	getClaim := func(ctx context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
		return d.cfg.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	}
	for _, h := range holders {
		timeout := min(prepare.APITimeout, max(time.Until(deadline), time.Second))
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		stale, err := d.state.Stale(callCtx, getClaim, h)
		cancel()
		if err != nil || !stale {
			return false, err
		}
	}
	return true, nil
}

// releaseUnused releases the holders no container can have used (see
// above) and reports whether it released any.
func (d *Driver) releaseUnused(ctx context.Context, holders []checkpoint.PreparedClaim) bool {
	logger := klog.FromContext(ctx)
	released := false
	for _, h := range holders {
		if !h.Prepared() || !d.use.takeUnused(h.UID) {
			continue
		}
		ok, err := d.state.ReleaseStale(ctx, h)
		if err != nil || !ok {
			d.use.untake(h.UID)
			if err != nil {
				logger.Error(err, "Releasing a claim the API no longer has, which no container used", "claim", klog.KRef(h.Namespace, h.Name), "claimUID", h.UID)
			}
			continue
		}
		logger.Info("Released a claim the API no longer has, which no container used (its pod never started)", "claim", klog.KRef(h.Namespace, h.Name), "claimUID", h.UID)
		d.use.forget(h.UID)
		released = true
	}
	return released
}

// describe names claims for messages: namespace/name (UID).
func describe(holders []checkpoint.PreparedClaim) string {
	s := "claim"
	if len(holders) > 1 {
		s = "claims"
	}
	for i, h := range holders {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %s/%s (%s)", h.Namespace, h.Name, h.UID)
	}
	return s
}
