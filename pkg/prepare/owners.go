// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// Ownership (docs/node-lifecycle.md, "Who owns what"). Every record on
// disk owns the hardware it names until an unprepare of that claim
// removes the record: a record of this driver in any state (started,
// completed, restore pending, not restored) and a record a newer driver
// wrote (after a downgrade, read as far as this driver can). owners is
// the one answer to "who owns this": reservation (held), the cleanup of
// unowned MIG devices and MPS daemons, spec adoption at start, sharing
// release and restore's adoption of a MIG device all ask it.

// owners is a snapshot of every owning record.
type owners struct {
	records []checkpoint.PreparedClaim
	// opaque: a newer record could not be read, so what it owns is
	// unknown; nothing may then be destroyed or stopped as unowned.
	opaque bool
}

// owners takes the snapshot.
func (s *State) owners() owners {
	records, opaque := s.Store.Owning()
	return owners{records: records, opaque: opaque}
}

// migKey names a MIG device by its parent GPU and GPU instance.
type migKey struct {
	parent string
	giID   int
}

// migOwner returns the claim that owns the MIG device, if any.
func (o owners) migOwner(parent string, giID int) (types.UID, bool) {
	for _, rec := range o.records {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.GIID >= 0 && d.Mig.GIID == giID && d.Mig.ParentUUID == parent {
				return rec.UID, true
			}
		}
	}
	return "", false
}

// ownedMig is the set of MIG devices that records own.
func (o owners) ownedMig() map[migKey]bool {
	out := map[migKey]bool{}
	for _, rec := range o.records {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.GIID >= 0 {
				out[migKey{d.Mig.ParentUUID, d.Mig.GIID}] = true
			}
		}
	}
	return out
}

// mpsTargets are the devices whose MPS daemon some record uses.
func (o owners) mpsTargets() map[string]bool {
	out := map[string]bool{}
	for _, rec := range o.records {
		for _, d := range rec.Devices {
			if d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy && d.Sharing.Target != "" {
				out[d.Sharing.Target] = true
			}
		}
	}
	return out
}

// sharing returns the setting (and its claim) of a record other than
// claim's that uses the same strategy on the same device, or nil.
func (o owners) sharing(claim types.UID, rec *checkpoint.SharingRecord) (*checkpoint.SharingRecord, *checkpoint.PreparedClaim) {
	for i := range o.records {
		other := &o.records[i]
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

// holdAll marks every owning record's devices as held, replacing what was
// held: at start, before anything is rolled back or restored, so that no
// claim can be prepared on the hardware of one that is not restored (yet).
func (s *State) holdAll() {
	o := s.owners()
	held := make(map[types.UID][]heldDevice, len(o.records))
	for _, rec := range o.records {
		held[rec.UID] = s.heldDevices(rec)
	}
	s.mu.Lock()
	s.held = held
	s.mu.Unlock()
}

// PassthroughHeld is the GPUs (by UUID) that records hold for a virtual
// machine (passthrough.go): from the record written before its first sysfs
// write until the one deleted once NVML sees the GPU again. NVML cannot
// reach such a GPU, and the health monitor must not take that for a fault.
func (s *State) PassthroughHeld() map[string]bool {
	held := map[string]bool{}
	for _, rec := range s.owners().records {
		for _, d := range rec.Devices {
			if d.Vfio != nil {
				held[d.UUID] = true
			}
		}
	}
	return held
}
