// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ledger is the node plugin's one answer to "who holds what". It
// owns the checkpoint store (every record of a prepared or half-prepared
// claim, written whole and atomically), the in-memory holds that keep two
// claims off one piece of hardware, and the claims that could not be
// restored. Its writes are the only writes of the store; its View is the
// one read of who holds each GPU, MIG placement, MPS daemon and VFIO
// binding, for records of every format and state.
//
// The model is the kubelet's claimInfoCache (pkg/kubelet/cm/dra): one
// in-memory owner, written out whole. A record on disk holds the hardware
// its devices occupy (Footprint, read from the record alone) from the
// write before the first change to the hardware until the write that
// deletes it, whatever the node publishes meanwhile.
//
// Lock order: a claim's lock, then its GPUs' locks (pkg/prepare), then the
// ledger's mutex, which is never held across I/O other than the store's
// own atomic file writes.
package ledger

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// Ledger is the node's record of prepared claims.
type Ledger struct {
	store *checkpoint.Store

	mu sync.Mutex // guards held and unrestored
	// held is what each claim with a record holds, in memory, so that a
	// reservation is checked and made in one step.
	held map[types.UID][]Footprint
	// unrestored are claims whose devices could not be restored, with why.
	unrestored map[types.UID]*RestoreError
	// foreign are another driver's claims held here (foreign.go).
	foreign map[types.UID]checkpoint.PreparedClaim
}

// New is the ledger over an opened store. Call HoldAll before serving.
func New(store *checkpoint.Store) *Ledger {
	return &Ledger{store: store, held: map[types.UID][]Footprint{}, unrestored: map[types.UID]*RestoreError{}}
}

// Begin checks that a claim's devices overlap neither each other nor any
// other holder's, holds them, and writes the claim's first record (state
// PrepareStarted), before anything on the node changes. A claim that
// already holds hardware (an earlier attempt) has had it released first.
func (l *Ledger) Begin(rec checkpoint.PreparedClaim) error { return l.begin(rec, true) }

// BeginUnwritten is Begin without the write: for a prepare that changes
// nothing on the node that a release would undo (pkg/prepare decides by
// device kind and sharing). A crash before its completed record leaves
// nothing to roll back, so a record written ahead would protect nothing;
// the claim is held in memory until its first write, Record's completed
// record, or its Release.
func (l *Ledger) BeginUnwritten(rec checkpoint.PreparedClaim) error { return l.begin(rec, false) }

func (l *Ledger) begin(rec checkpoint.PreparedClaim, write bool) error {
	if err := checkWithin(rec); err != nil {
		return err
	}
	want := Footprints(rec)
	l.mu.Lock()
	if err := l.conflictLocked(rec.UID, rec.Devices, want); err != nil {
		l.mu.Unlock()
		return err
	}
	l.held[rec.UID] = want
	// This driver's own prepare of a UID another driver began (its
	// prepare never completed, so the kubelet asks again) holds the UID
	// from now on: releasing the other driver's claim must leave this
	// hold (ReleaseForeign).
	delete(l.foreign, rec.UID)
	l.mu.Unlock()
	if !write {
		return nil
	}
	if err := l.store.Put(rec); err != nil {
		l.forget(rec.UID)
		return err
	}
	return nil
}

// Record writes a claim's record as it is now: progress of a prepare (a
// MIG device's identity once made, the binding a VM's GPU is to get), its
// completion, or a restore. The claim keeps holding what the record names.
func (l *Ledger) Record(rec checkpoint.PreparedClaim) error {
	if err := l.store.Put(rec); err != nil {
		return err
	}
	l.hold(rec)
	return nil
}

// Release deletes a claim's record once nothing of it is left on the node,
// and with it the claim's hold and restore failure.
func (l *Ledger) Release(uid types.UID) error {
	if err := l.store.Delete(uid); err != nil {
		return err
	}
	l.forget(uid)
	return nil
}

// HoldAll holds what every owning record names (of this driver's formats
// or a newer one's), replacing every hold: at start, before anything is
// rolled back or restored, so that no claim can be prepared on the
// hardware of one that is not restored (yet).
func (l *Ledger) HoldAll() {
	records, _ := l.store.Owning() // View without the foreign claims
	held := make(map[types.UID][]Footprint, len(records))
	for _, rec := range records {
		held[rec.UID] = Footprints(rec)
	}
	l.mu.Lock()
	for _, rec := range l.foreignRecordsLocked() {
		if _, own := held[rec.UID]; !own { // an owning record of the UID holds it
			held[rec.UID] = Footprints(rec)
		}
	}
	l.held = held
	l.mu.Unlock()
}

// CheckHeld reports whether a kept claim's devices overlap another
// holder's: before a restore configures them again, at start as on retry.
func (l *Ledger) CheckHeld(rec checkpoint.PreparedClaim) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conflictLocked(rec.UID, rec.Devices, Footprints(rec))
}

func (l *Ledger) hold(rec checkpoint.PreparedClaim) {
	fps := Footprints(rec)
	l.mu.Lock()
	l.held[rec.UID] = fps
	l.mu.Unlock()
}

func (l *Ledger) forget(uid types.UID) {
	l.mu.Lock()
	delete(l.held, uid)
	delete(l.unrestored, uid)
	l.mu.Unlock()
}

// conflictLocked checks footprints a claim wants against every other
// holder's; the caller holds l.mu.
func (l *Ledger) conflictLocked(uid types.UID, devices []checkpoint.PreparedDevice, want []Footprint) error {
	for owner, held := range l.held {
		if owner == uid {
			continue
		}
		for _, h := range held {
			for i, w := range want {
				if !h.Conflicts(w) {
					continue
				}
				if h.Device == devices[i].Device {
					return fmt.Errorf("device %s is already prepared for claim %s", w.Device, owner)
				}
				return fmt.Errorf("device %s shares GPU hardware with device %s, already prepared for claim %s", w.Device, h.Device, owner)
			}
		}
	}
	return nil
}

// Get is a claim's record in this driver's format.
func (l *Ledger) Get(uid types.UID) (checkpoint.PreparedClaim, bool) { return l.store.Get(uid) }

// Claims lists the records in this driver's format, for the walks of
// start-up and the supervisor; who holds what is View's answer.
func (l *Ledger) Claims() []checkpoint.PreparedClaim { return l.store.List() }

// NewerError is the error for a claim whose record a newer driver wrote.
func (l *Ledger) NewerError(uid types.UID) error { return l.store.NewerError(uid) }

// Newer reports whether a newer driver's record exists for uid.
func (l *Ledger) Newer(uid types.UID) bool {
	_, ok := l.store.Newer(uid)
	return ok
}
