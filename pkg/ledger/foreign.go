// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// A foreign claim is one that another driver of the same name prepared on
// this node and whose pods may still run: NVIDIA's reference driver's,
// on a node switched to this driver (pkg/driver/reference.go). The ledger
// holds its hardware like a claim of its own, in memory only (the other
// driver's checkpoint is its record), so that nothing is prepared on it
// and nothing of it is taken for unowned (View includes it), until the
// kubelet's unprepare of it has released what the other driver made.
// Its record is in state PrepareStarted: this driver never told the
// kubelet it prepared it, so it writes no device status for it and does
// not count it among its prepared devices.

// HoldForeign holds what rec names for a foreign claim, and reports an
// error if one of its devices overlaps another holder's: two drivers'
// records never should.
func (l *Ledger) HoldForeign(rec checkpoint.PreparedClaim) error {
	rec.State = checkpoint.PrepareStarted
	fps := Footprints(rec)
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.conflictLocked(rec.UID, rec.Devices, fps)
	if l.foreign == nil {
		l.foreign = map[types.UID]checkpoint.PreparedClaim{}
	}
	l.foreign[rec.UID] = rec
	l.held[rec.UID] = fps
	return err
}

// Foreign reports whether uid is a foreign claim the ledger holds.
func (l *Ledger) Foreign(uid types.UID) (checkpoint.PreparedClaim, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, ok := l.foreign[uid]
	return rec, ok
}

// ForeignClaims are the foreign claims held.
func (l *Ledger) ForeignClaims() []checkpoint.PreparedClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]checkpoint.PreparedClaim, 0, len(l.foreign))
	for _, rec := range l.foreign {
		out = append(out, rec)
	}
	return out
}

// ReleaseForeign stops holding a foreign claim: nothing of it is left on
// the node.
func (l *Ledger) ReleaseForeign(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.foreign[uid]; !ok {
		return
	}
	delete(l.foreign, uid)
	delete(l.held, uid)
}

// foreignRecordsLocked are the foreign claims' records; the caller holds
// l.mu.
func (l *Ledger) foreignRecordsLocked() []checkpoint.PreparedClaim {
	out := make([]checkpoint.PreparedClaim, 0, len(l.foreign))
	for _, rec := range l.foreign {
		out = append(out, rec)
	}
	return out
}
