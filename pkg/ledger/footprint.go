// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"fmt"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// Footprint is the hardware one recorded device occupies, read from the
// record alone: the GPU by UUID and, for a MIG device, its memory slices.
// It never depends on what the node publishes now, so a claim whose device
// is no longer offered (passthrough or --mig-profiles changed, a device
// renamed after a reboot) keeps what it holds until it is unprepared.
type Footprint struct {
	// GPU is the UUID of the physical GPU (the parent of a MIG device).
	GPU string
	// Whole: the device occupies the whole GPU; otherwise the MIG memory
	// slices [Start, Start+Size).
	Whole       bool
	Start, Size uint32
	// Share: one of several allocations of the same device (a memory
	// fraction): shares of one device coexist.
	Share bool
	// Admin: admin access watches the device and uses nothing.
	Admin bool
	// Exclusive: the GPU belongs to a VM (vfio-pci); nothing else of it,
	// admin access included, may be prepared beside it.
	Exclusive bool
	// Device is the device's name, for messages.
	Device string
}

// Of is the footprint of a recorded device. A MIG record without a size
// (written before sizes were recorded) is taken to hold its whole GPU:
// refusing a neighbour is safe, handing out its slices is not.
func Of(d checkpoint.PreparedDevice) Footprint {
	f := Footprint{GPU: d.UUID, Whole: true, Device: d.Device, Admin: d.AdminAccess, Share: d.Shared && !d.AdminAccess}
	if d.Mig != nil {
		f.GPU = d.Mig.ParentUUID
		if d.Mig.Size > 0 {
			f.Whole, f.Start, f.Size = false, d.Mig.Start, d.Mig.Size
		}
	}
	if d.Vfio != nil {
		f.Exclusive, f.Share, f.Admin = true, false, false
	}
	return f
}

// Footprints are the footprints of a record's devices.
func Footprints(rec checkpoint.PreparedClaim) []Footprint {
	out := make([]Footprint, 0, len(rec.Devices))
	for _, d := range rec.Devices {
		out = append(out, Of(d))
	}
	return out
}

// overlaps reports whether two footprints use the same hardware: one GPU
// used whole and anything on it, or two MIG devices whose memory slices
// intersect.
func (f Footprint) overlaps(o Footprint) bool {
	if f.GPU == "" || f.GPU != o.GPU {
		return false
	}
	if f.Whole || o.Whole {
		return true
	}
	return f.Start < o.Start+o.Size && o.Start < f.Start+f.Size
}

// sameDevice reports whether two footprints are the same device of a GPU.
func (f Footprint) sameDevice(o Footprint) bool {
	return f.GPU == o.GPU && f.Whole == o.Whole && f.Start == o.Start && f.Size == o.Size
}

// Conflicts reports whether two devices may not be held by two claims (or
// twice by one) at the same time.
func (f Footprint) Conflicts(o Footprint) bool {
	if !f.overlaps(o) {
		return false
	}
	if f.Exclusive || o.Exclusive {
		return true
	}
	if f.Admin || o.Admin {
		return false
	}
	return !(f.Share && o.Share && f.sameDevice(o))
}

// checkWithin refuses a claim whose own devices overlap: the scheduler
// never allocates that, and the driver is the last line of defence.
func checkWithin(rec checkpoint.PreparedClaim) error {
	fps := Footprints(rec)
	for i := range fps {
		for j := range i {
			if rec.Devices[j].Device == rec.Devices[i].Device {
				return fmt.Errorf("device %s is allocated twice in this claim (requests %q and %q); each device may appear once", rec.Devices[i].Device, rec.Devices[j].Requests, rec.Devices[i].Requests)
			}
			if fps[j].Conflicts(fps[i]) {
				return fmt.Errorf("devices %s and %s of this claim use the same GPU hardware", fps[j].Device, fps[i].Device)
			}
		}
	}
	return nil
}
