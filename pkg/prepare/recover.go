// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"fmt"
	"sort"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// ClaimGetter looks a claim up in the API.
type ClaimGetter func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)

// RecoveryReport says what Recover did.
type RecoveryReport struct {
	Kept, RolledBack, Stale, Rebuilt, OrphanSpecs, UnownedMig, UnownedMPS int
	// Restored counts kept claims whose devices were configured again
	// (after a reboot); Unrestored those that could not be.
	Restored, Unrestored int
	// DriverRewritten counts kept claims whose CDI spec named another
	// NVIDIA driver than the one installed now (an upgrade in place, in
	// the same boot) and was written again; each is also a problem.
	DriverRewritten int
	// Problems lists what Recover could not make sense of or could not
	// undo. None of them stops the plugin: it serves every other claim.
	Problems []string
}

func (r *RecoveryReport) problem(logger klog.Logger, err error, msg string, kv ...any) {
	logger.Error(err, msg, kv...)
	r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", msg, err))
}

// Recover is RecoverLocal followed by RemoveStale: the whole reconciliation
// in one call, for tools and tests. The plugin runs RecoverLocal before it
// serves the kubelet and RemoveStale in the background, so that its start
// never waits for the API server.
func (s *State) Recover(ctx context.Context, getClaim ClaimGetter) RecoveryReport {
	report := s.RecoverLocal(ctx)
	stale, _ := s.RemoveStale(ctx, getClaim)
	report.Stale, report.UnownedMPS = stale.Stale, stale.UnownedMPS
	report.Kept -= stale.Stale // restored locally, then found stale
	report.Problems = append(report.Problems, stale.Problems...)
	return report
}

// RecoverLocal reconciles the node with the checkpoint before the kubelet
// is served, from local state only (no API call, no wait for a daemon):
//   - a claim recorded only as PrepareStarted died half-way: it is rolled back;
//     so is what an unprepare left on a GPU that was lost (leftovers.go);
//   - a CDI spec without a record (its checkpoint was lost or moved aside)
//     is re-adopted from the record the spec carries; a spec that carries
//     none is removed;
//   - every prepared claim is restored (restore.go): after a reboot its
//     devices are configured again at their recorded placements, and a
//     damaged or missing CDI spec is rewritten. A claim that cannot be
//     restored is listed by Unrestored and its prepare fails with why.
//
// It never fails: the plugin must not crash-loop on its own state. What it
// cannot fix is logged and listed in the report's Problems.
func (s *State) RecoverLocal(ctx context.Context) RecoveryReport {
	logger := klog.FromContext(ctx)
	var report RecoveryReport

	if _, err := s.CDI.RemoveTempFiles(); err != nil {
		report.problem(logger, err, "Removing unfinished CDI spec writes")
	}
	specs, err := s.CDI.List()
	if err != nil {
		report.problem(logger, err, "Listing CDI specs")
	}
	for _, spec := range specs {
		if _, ok := s.Ledger.Get(spec.UID); ok {
			continue
		}
		if s.Ledger.Newer(spec.UID) {
			continue // a newer driver's claim: its spec is its own
		}
		rec, usable := checkpoint.FromSpecAnnotations(spec.UID, spec.Annotations)
		if !usable || rec.State != checkpoint.PrepareCompleted {
			logger.Info("Removing CDI spec without a usable record", "claimUID", spec.UID)
			if err := s.CDI.Remove(spec.UID); err != nil {
				report.problem(logger, err, "Removing CDI spec", "claimUID", spec.UID)
			}
			report.OrphanSpecs++
			continue
		}
		if err := s.Ledger.Record(rec); err != nil {
			report.problem(logger, err, "Rebuilding checkpoint record from CDI spec", "claimUID", rec.UID)
			continue
		}
		logger.Info("Rebuilt checkpoint record from CDI spec", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
		report.Rebuilt++
	}

	// Every record holds its devices from here on, whatever becomes of
	// its rollback or restore (pkg/ledger).
	s.Ledger.HoldAll()
	records := s.Ledger.Claims()
	for _, rec := range records {
		if rec.State != checkpoint.PrepareStarted {
			continue
		}
		msg := "Rolling back interrupted prepare"
		if _, ok := leftoverOf(rec.UID); ok {
			msg = "Releasing what an unprepare left on a GPU that was lost" // leftovers.go
		}
		logger.Info(msg, "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
		if _, err := s.reconcile(ctx, rec, released, atStart); err != nil {
			// Still configured, and still held: others stay off it.
			report.problem(logger, err, msg, "claimUID", rec.UID)
			continue
		}
		report.RolledBack++
	}
	for _, rec := range restoreOrder(records) {
		// Asked before the restore, which rewrites such a spec.
		driverStale := s.CDI.DriverStale(rec.UID)
		reconfigured, err := s.reconcile(ctx, rec, held, atStart)
		if err != nil {
			report.problem(logger, err, "Restoring prepared claim", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			report.Unrestored++
			continue
		}
		if reconfigured {
			report.Restored++
		}
		report.Kept++
		if driverStale != "" {
			// Nothing reaches a container that runs already: it keeps the
			// old driver's files it was started with (docs/node-lifecycle.md).
			err := fmt.Errorf("its CDI spec %s; it is rewritten for the driver installed now, which the claim's containers get at their next start (running ones keep the old driver's files: drain a node before upgrading its driver in place)", driverStale)
			report.problem(logger, err, "Rewrote the CDI spec of a prepared claim after an in-place driver change", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			report.DriverRewritten++
		}
		if moved := s.movedDevices(rec); len(moved) > 0 {
			err := fmt.Errorf("devices %v are no longer offered under their names (a chart value or feature gate changed, or the GPUs were renumbered by a driver reload); the claim keeps its hardware, found by UUID, until the kubelet unprepares it", moved)
			report.problem(logger, err, "Prepared claim names devices this node no longer offers as its hardware", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
		}
	}
	report.UnownedMig = s.destroyUnownedMig(logger, &report)
	return report
}

// StaleReport says what RemoveStale did.
type StaleReport struct {
	Stale, UnownedMPS int
	Problems          []string
}

// APITimeout bounds each API call of RemoveStale.
const APITimeout = 10 * time.Second

// RemoveStale unprepares prepared claims that the kubelet will never
// unprepare: the ResourceClaim is gone, was replaced by one with another
// UID, or is now allocated other devices. Then it stops MPS daemons no
// claim uses. It runs beside the kubelet's calls, each claim under the
// locks a prepare takes. Each API call has a timeout; a claim the API
// could not tell about is kept, and the returned error says to try again.
func (s *State) RemoveStale(ctx context.Context, getClaim ClaimGetter) (StaleReport, error) {
	logger := klog.FromContext(ctx)
	var report StaleReport
	var unanswered error
	for _, rec := range s.Ledger.Claims() {
		if !rec.Prepared() {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, APITimeout)
		claim, stale, err := s.isStale(callCtx, getClaim, rec)
		cancel()
		if err != nil {
			// The API cannot tell us; keeping the claim is the safe choice.
			logger.Error(err, "Cannot check claim, keeping it prepared", "claim", klog.KRef(rec.Namespace, rec.Name))
			unanswered = err
			continue
		}
		if !stale {
			// Written again (coalesced, in the background): restored
			// devices have new UUIDs, and a plugin killed right after a
			// prepare may never have written it.
			if s.Status != nil && rec.State == checkpoint.PrepareCompleted {
				s.Status.Prepared(claim, rec.Devices)
			}
			continue
		}
		removed, err := s.unprepareIf(ctx, rec.UID, func(cur checkpoint.PreparedClaim) bool { return sameAllocation(cur.Devices, rec.Devices) })
		if err != nil {
			msg := "Unpreparing claim that no longer exists or has another allocation"
			logger.Error(err, msg, "claimUID", rec.UID)
			report.Problems = append(report.Problems, fmt.Sprintf("%s: %v", msg, err))
			continue
		}
		if removed {
			logger.Info("Unprepared claim that no longer exists or has another allocation", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			report.Stale++
		}
	}
	var rep RecoveryReport
	leave, err := s.enter()
	if err != nil {
		return report, err
	}
	report.UnownedMPS = s.stopUnownedMPS(logger, &rep)
	leave()
	report.Problems = append(report.Problems, rep.Problems...)
	if unanswered != nil {
		return report, fmt.Errorf("the API server did not answer for every prepared claim: %w", unanswered)
	}
	return report, nil
}

// unprepareIf unprepares a claim like the kubelet would, if its record
// still passes check once the claim's lock is held.
func (s *State) unprepareIf(ctx context.Context, uid types.UID, check func(checkpoint.PreparedClaim) bool) (bool, error) {
	leave, err := s.enter()
	if err != nil {
		return false, err
	}
	defer leave()
	unlockClaim := s.claimLocks.Lock(string(uid))
	defer unlockClaim()
	cur, ok := s.Ledger.Get(uid)
	if !ok || !cur.Prepared() || !check(cur) {
		return false, nil
	}
	_, err = s.reconcile(ctx, cur, released, serving)
	return true, err
}

// isStale reports whether a prepared claim's record no longer describes
// the ResourceClaim: it is gone, replaced (another UID) or allocated other
// devices (an unprepare missed while the plugin was down, and the claim
// allocated again).
func (s *State) isStale(ctx context.Context, getClaim ClaimGetter, rec checkpoint.PreparedClaim) (*resourceapi.ResourceClaim, bool, error) {
	claim, err := getClaim(ctx, rec.Namespace, rec.Name)
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return claim, claim.UID != rec.UID || !s.allocatedAsRecorded(claim, rec), nil
}

// restoreOrder is the order start restores kept claims in: claims without
// dynamic MIG devices first (a whole GPU needs MIG mode off unless it is
// admin access), then by UID, so that the outcome never depends on map
// order.
func restoreOrder(records []checkpoint.PreparedClaim) []checkpoint.PreparedClaim {
	out := make([]checkpoint.PreparedClaim, 0, len(records))
	for _, rec := range records {
		if rec.State != checkpoint.PrepareStarted {
			out = append(out, rec)
		}
	}
	hasMig := func(rec checkpoint.PreparedClaim) bool {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.Dynamic {
				return true
			}
		}
		return false
	}
	sort.SliceStable(out, func(i, j int) bool {
		if mi, mj := hasMig(out[i]), hasMig(out[j]); mi != mj {
			return !mi
		}
		return out[i].UID < out[j].UID
	})
	return out
}
