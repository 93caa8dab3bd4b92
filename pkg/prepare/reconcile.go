// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
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
	return false, s.release(rec, at)
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
// the record last.
func (s *State) release(rec checkpoint.PreparedClaim, at phase) error {
	if err := s.markUnbinding(&rec); err != nil {
		return err
	}
	if err := s.CDI.Remove(rec.UID); err != nil {
		return err
	}
	env := s.env(s.addressTrusted(rec))
	for _, d := range rec.Devices {
		if at == atStart && d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy {
			continue // stopped as unowned, in the background
		}
		if err := s.releaseSharing(rec.UID, d.Sharing); err != nil {
			return fmt.Errorf("device %s: %w", d.Device, err)
		}
		// Released by the kind the record says, on the record's own
		// hardware (liveDevice: by UUID and placement, published under its
		// name, under another one after a renumbering, or not at all after
		// a chart value or feature gate was turned off); a device whose GPU
		// is gone (fell off the bus) is released as far as its kind can
		// without it.
		if err := devkind.OfRecord(d).Release(env, d, s.liveDeviceOrNil(d)); err != nil {
			return fmt.Errorf("device %s: %w", d.Device, err)
		}
	}
	return s.Ledger.Release(rec.UID)
}
