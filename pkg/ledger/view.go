// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// View is a snapshot of every owning record: a record of this driver in
// any state (started, completed, restore pending, not restored) and a
// record a newer driver wrote (after a downgrade, read as far as this
// driver can). Every record owns the hardware it names until its claim's
// unprepare deletes it. The device table, the start-up cleanup of unowned
// MIG devices and MPS daemons, sharing, metrics and health all read it.
type View struct {
	records []checkpoint.PreparedClaim
	// opaque: a newer record could not be read, so what it owns is
	// unknown; nothing may then be destroyed or stopped as unowned.
	opaque bool
}

// View takes the snapshot.
func (l *Ledger) View() View {
	records, opaque := l.store.Owning()
	l.mu.Lock()
	records = append(records, l.foreignRecordsLocked()...) // foreign.go
	l.mu.Unlock()
	return View{records: records, opaque: opaque}
}

// With is the view plus records that hold hardware without a checkpoint
// file (yet): the records CDI specs carry for claims whose checkpoint file
// was lost, which start rebuilds from them.
func (v View) With(extra ...checkpoint.PreparedClaim) View {
	out := v
	out.records = append(append([]checkpoint.PreparedClaim(nil), v.records...), extra...)
	return out
}

// Records are the owning records.
func (v View) Records() []checkpoint.PreparedClaim { return v.records }

// Opaque reports whether a newer record could not be read.
func (v View) Opaque() bool { return v.opaque }

// MigKey names a MIG device by its parent GPU and GPU instance.
type MigKey struct {
	Parent string
	GIID   int
}

// MigOwner returns the claim that owns the MIG device, if any.
func (v View) MigOwner(parent string, giID int) (types.UID, bool) {
	for _, rec := range v.records {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.GIID >= 0 && d.Mig.GIID == giID && d.Mig.ParentUUID == parent {
				return rec.UID, true
			}
		}
	}
	return "", false
}

// OwnedMig is the set of MIG devices that records own.
func (v View) OwnedMig() map[MigKey]bool {
	out := map[MigKey]bool{}
	for _, rec := range v.records {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.GIID >= 0 {
				out[MigKey{d.Mig.ParentUUID, d.Mig.GIID}] = true
			}
		}
	}
	return out
}

// MPSTargets are the devices whose MPS daemon some record uses.
func (v View) MPSTargets() map[string]bool {
	out := map[string]bool{}
	for _, rec := range v.records {
		for _, d := range rec.Devices {
			if d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy && d.Sharing.Target != "" {
				out[d.Sharing.Target] = true
			}
		}
	}
	return out
}

// Sharing returns the setting (and its claim) of a record other than
// claim's that uses the same strategy on the same device, or nil.
func (v View) Sharing(claim types.UID, rec *checkpoint.SharingRecord) (*checkpoint.SharingRecord, *checkpoint.PreparedClaim) {
	for i := range v.records {
		other := &v.records[i]
		if other.UID == claim {
			continue
		}
		for _, d := range other.Devices {
			if d.Sharing != nil && d.Sharing.Strategy == rec.Strategy && d.Sharing.Target == rec.Target {
				return d.Sharing, other
			}
		}
	}
	return nil, nil
}

// Passthrough is the GPUs (by UUID) that records hold for a virtual
// machine: from the record written before the first sysfs write until the
// one deleted once NVML sees the GPU again. NVML cannot reach such a GPU,
// and the health monitor must not take that for a fault.
func (v View) Passthrough() map[string]bool {
	held := map[string]bool{}
	for _, rec := range v.records {
		for _, d := range rec.Devices {
			if d.Vfio != nil {
				held[d.UUID] = true
			}
		}
	}
	return held
}

// PreparedDevices counts the devices of claims the kubelet was told are
// prepared.
func (v View) PreparedDevices() int {
	n := 0
	for _, rec := range v.records {
		if rec.State == checkpoint.PrepareCompleted {
			n += len(rec.Devices)
		}
	}
	return n
}

// RestoreError says why a prepared claim could not be restored (after a
// reboot or a GPU reset) or served as recorded (a device it names is no
// longer offered). Prepare of the claim fails with it until a restore
// succeeds; it is never answered from the stale record. The claim keeps
// its hardware meanwhile.
type RestoreError struct {
	Namespace, Name string
	UID             types.UID
	// Reconfigure: the claim's devices lost their configuration (a
	// reboot or a GPU reset) and could not be configured again.
	Reconfigure bool
	Reason      error
}

func (e *RestoreError) Error() string {
	if e.Reconfigure {
		return fmt.Sprintf("claim %s/%s was prepared before the node rebooted (or its GPU was reset) and cannot be restored: %v", e.Namespace, e.Name, e.Reason)
	}
	return fmt.Sprintf("claim %s/%s is prepared but cannot be served as recorded: %v", e.Namespace, e.Name, e.Reason)
}

func (e *RestoreError) Unwrap() error { return e.Reason }

// MarkUnrestored records why a claim could not be restored and returns
// the error. The claim keeps holding what rec names.
func (l *Ledger) MarkUnrestored(rec checkpoint.PreparedClaim, reconfigure bool, cause error) error {
	l.hold(rec)
	e := &RestoreError{Namespace: rec.Namespace, Name: rec.Name, UID: rec.UID, Reconfigure: reconfigure, Reason: cause}
	l.mu.Lock()
	l.unrestored[rec.UID] = e
	l.mu.Unlock()
	return e
}

// Restored forgets a claim's restore failure.
func (l *Ledger) Restored(uid types.UID) {
	l.mu.Lock()
	delete(l.unrestored, uid)
	l.mu.Unlock()
}

// Unrestored lists the claims whose devices could not be restored.
func (l *Ledger) Unrestored() []*RestoreError {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*RestoreError, 0, len(l.unrestored))
	for _, e := range l.unrestored {
		out = append(out, e)
	}
	return out
}

// UnrestoredErr is a claim's restore failure, nil when none.
func (l *Ledger) UnrestoredErr(uid types.UID) *RestoreError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unrestored[uid]
}
