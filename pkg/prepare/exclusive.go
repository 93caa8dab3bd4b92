// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// heldDevice is a device a prepared claim holds.
type heldDevice struct {
	dev *AllocatableDevice
	// share is a memory-fraction share (or another multi-allocation) of
	// dev: shares of one device coexist.
	share bool
	// admin is admin access: it monitors the device and never conflicts.
	admin bool
}

func heldFrom(dev *AllocatableDevice, rec checkpoint.PreparedDevice) heldDevice {
	return heldDevice{dev: dev, share: rec.Shared && !rec.AdminAccess, admin: rec.AdminAccess}
}

// overlaps reports whether two devices use the same hardware: one GPU used
// whole and any MIG device of it, or two MIG devices whose memory slices
// intersect. Names alone do not tell: gpu-0 and gpu-0-mig-1g10gb-0 are
// different devices on one GPU.
func overlaps(a, b *AllocatableDevice) bool {
	if a.GPU.UUID != b.GPU.UUID {
		return false
	}
	if !a.Kind.IsMIG() || !b.Kind.IsMIG() {
		return true
	}
	pa, pb := a.Placement, b.Placement
	return pa.Start < pb.Start+pb.Size && pb.Start < pa.Start+pa.Size
}

func conflict(a, b heldDevice) bool {
	if !overlaps(a.dev, b.dev) {
		return false
	}
	if isVFIO(a) || isVFIO(b) {
		return true // passthrough.go
	}
	if a.admin || b.admin {
		return false
	}
	return !(a.share && b.share && a.dev.Name == b.dev.Name)
}

// reserve marks devices as held by the claim after checking them against
// each other and against every other prepared claim. Kubernetes should
// never hand one GPU to two claims (its counters keep whole GPUs and MIG
// devices apart), but the driver is the last line of defence against two
// workloads on one GPU.
func (s *State) reserve(uid types.UID, planned []plannedDevice, records []checkpoint.PreparedDevice) error {
	want := make([]heldDevice, len(planned))
	for i, p := range planned {
		want[i] = heldFrom(p.device, records[i])
		for j := range i {
			if planned[j].device.Name == p.device.Name {
				return fmt.Errorf("device %s is allocated twice in this claim (requests %q and %q); each device may appear once", p.device.Name, records[j].Requests, records[i].Requests)
			}
			if conflict(want[j], want[i]) {
				return fmt.Errorf("devices %s and %s of this claim use the same GPU hardware", planned[j].device.Name, p.device.Name)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.conflictLocked(uid, want); err != nil {
		return err
	}
	s.held[uid] = want
	return nil
}

// conflictLocked checks devices a claim wants against every other
// holder's; the caller holds s.mu.
func (s *State) conflictLocked(uid types.UID, want []heldDevice) error {
	for owner, held := range s.held {
		if owner == uid {
			continue
		}
		for _, h := range held {
			for _, w := range want {
				if h.dev != nil && conflict(h, w) {
					if h.dev.Name == w.dev.Name {
						return fmt.Errorf("device %s is already prepared for claim %s", w.dev.Name, owner)
					}
					return fmt.Errorf("device %s shares GPU hardware with device %s, already prepared for claim %s", w.dev.Name, h.dev.Name, owner)
				}
			}
		}
	}
	return nil
}

// checkHeld reports whether a kept claim's devices conflict with another
// holder's, before a restore configures them again.
func (s *State) checkHeld(rec checkpoint.PreparedClaim) error {
	want := s.heldDevices(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflictLocked(rec.UID, want)
}

// heldDevices are the devices of a record that this node offers.
func (s *State) heldDevices(rec checkpoint.PreparedClaim) []heldDevice {
	held := make([]heldDevice, 0, len(rec.Devices))
	for _, d := range rec.Devices {
		if dev, ok := s.Devices[d.Device]; ok {
			held = append(held, heldFrom(dev, d))
		}
	}
	return held
}

// hold records the devices of a kept claim without checks: they are
// prepared already.
func (s *State) hold(rec checkpoint.PreparedClaim) {
	held := s.heldDevices(rec)
	s.mu.Lock()
	s.held[rec.UID] = held
	s.mu.Unlock()
}

// releaseHeld forgets what a claim holds; only once its record is gone.
func (s *State) releaseHeld(uid types.UID) {
	s.mu.Lock()
	delete(s.held, uid)
	s.mu.Unlock()
}
