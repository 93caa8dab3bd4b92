// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
)

// The reconciler. Every path that changes the node for a claim makes the
// node match what the ledger says the claim is to hold:
//
//   - held: a prepared claim keeps its record's devices, configured as
//     recorded (restore, at start and on the kubelet's retry). A failed
//     attempt undoes only what it did: the claim keeps its record and its
//     hardware, and is listed as unrestored until an attempt succeeds.
//   - released: nothing (unprepare, the rollback of a half-done prepare,
//     a claim deleted or reallocated while the plugin was down). Every
//     device is released by the kind its record names, published or not,
//     and the record goes last, so that a failure leaves it for the next
//     try.
//
// A new prepare writes its intent (pkg/ledger Begin, which checks overlap
// with every other holder) and configures forward; on failure its intent
// is released again. Overlap is the ledger's answer everywhere: Begin for a
// new claim, CheckHeld before a restore configures anything.

// intent is what the node is to hold for a claim.
type intent int

const (
	released intent = iota
	held
)

// phase says when reconcile runs: at start, before the kubelet is served,
// nothing waits for the API server (an MPS daemon is a pod: it is left
// unowned and stopped in the background).
type phase int

const (
	serving phase = iota
	atStart
)

// reconcile takes the locks of the GPUs the claim's record occupies and
// makes the node match intent; the caller holds the claim's lock. For held
// it reports whether the claim's devices were configured again.
func (s *State) reconcile(ctx context.Context, rec checkpoint.PreparedClaim, want intent, at phase) (bool, error) {
	defer s.lockRecordDevices(rec)()
	return s.reconcileLocked(ctx, rec, want, at)
}

// reconcileLocked is reconcile for a caller that holds the GPUs' locks.
func (s *State) reconcileLocked(ctx context.Context, rec checkpoint.PreparedClaim, want intent, at phase) (bool, error) {
	if want == held {
		return s.restore(klog.FromContext(ctx), rec)
	}
	return false, s.release(ctx, rec, at)
}

// lockRecordDevices locks the GPUs a record's devices occupy (by UUID,
// published or not), and returns the unlock.
func (s *State) lockRecordDevices(rec checkpoint.PreparedClaim) func() {
	keys := make([]string, 0, len(rec.Devices))
	for _, f := range ledger.Footprints(rec) {
		if f.GPU != "" {
			keys = append(keys, f.GPU)
		}
	}
	return s.deviceLocks.Lock(keys...)
}

// release undoes every step of a (possibly partial) prepare, and deletes
// the record last. Every device is released however another one fails,
// so that one device never keeps the others. A failure keeps the record
// for the next try (the kubelet's retry, or the next start), except where
// the device's GPU is lost: what stays there is recorded apart and the
// claim released (leftovers.go).
func (s *State) release(ctx context.Context, rec checkpoint.PreparedClaim, at phase) error {
	if err := s.markUnbinding(&rec); err != nil {
		return err
	}
	if err := s.CDI.Remove(rec.UID); err != nil {
		return err
	}
	env := s.env(s.addressTrusted(rec))
	var failed []error
	var lost []checkpoint.PreparedDevice
	for _, d := range rec.Devices {
		left, err := s.releaseDevice(env, rec.UID, d, at)
		switch {
		case err == nil:
		case s.gpuLost(d):
			klog.FromContext(ctx).Info("Cannot release a device: its GPU is lost", "claimUID", rec.UID, "device", d.Device, "err", err)
			lost = append(lost, left)
		default:
			failed = append(failed, fmt.Errorf("device %s: %w", d.Device, err))
		}
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	if len(lost) > 0 {
		return s.keepLeftovers(klog.FromContext(ctx), rec, lost)
	}
	return s.Ledger.Release(rec.UID)
}
