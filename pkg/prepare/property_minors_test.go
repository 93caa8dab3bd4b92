// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"bytes"
	"os"
	"slices"
	"strconv"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// TestOwnershipProperty's renumbered minors: a reboot after which the two
// GPUs have each other's minor numbers (a card moved, or the driver
// enumerated them in another order), or a driver reload in the same boot
// (property_reload_test.go). Device names carry the minor, so a name can
// now mean the other GPU's hardware; claims allocated before keep their
// names in the API. The plugin must go by what each claim holds: a claim
// whose name now means other hardware is not restored there but on its
// own GPU, at that GPU's minor now, and a new claim that the scheduler
// gives that GPU under its new name is refused.

// renumberMinors swaps the GPUs' minors; what the node publishes follows.
func (p *prop) renumberMinors() {
	if len(p.gpus) < 2 {
		return
	}
	p.gpus[0].Minor, p.gpus[1].Minor = p.gpus[1].Minor, p.gpus[0].Minor
}

// gpuIndex is the index in p.gpus of the GPU with that UUID.
func (p *prop) gpuIndex(uuid string) int {
	for i, g := range p.gpus {
		if g.UUID == uuid {
			return i
		}
	}
	p.fail("no GPU %s", uuid)
	return -1
}

// recordedGPU is the UUID of the physical GPU a recorded device is on.
func recordedGPU(d checkpoint.PreparedDevice) string {
	if d.Mig != nil {
		return d.Mig.ParentUUID
	}
	return d.UUID
}

// heldConflict is the test's model of two allocated devices that two
// claims may not hold at once: overlapping hardware, unless one is admin
// access or both are shares of the same GPU; a VM's GPU admits nothing
// beside it, admin access included.
func heldConflict(a, b *AllocatableDevice, adminA, adminB, shareA, shareB bool) bool {
	if !devicesOverlap(a, b) {
		return false
	}
	if a.Kind == configapi.VFIO || b.Kind == configapi.VFIO {
		return true
	}
	if adminA || adminB {
		return false
	}
	return !(shareA && shareB && !a.Kind.IsMIG() && !b.Kind.IsMIG())
}

// heldByOthers are the live claims that hold hardware lc was allocated.
func (p *prop) heldByOthers(lc *liveClaim) []*liveClaim {
	var out []*liveClaim
	for _, o := range p.live {
		if o != lc && claimsConflict(lc, o) {
			out = append(out, o)
		}
	}
	return out
}

func claimsConflict(a, b *liveClaim) bool {
	ra, rb := a.c.Status.Allocation.Devices.Results, b.c.Status.Allocation.Devices.Results
	for i, da := range a.held {
		for j, db := range b.held {
			if heldConflict(da, db, ra[i].AdminAccess != nil, rb[j].AdminAccess != nil, ra[i].ShareID != nil, rb[j].ShareID != nil) {
				return true
			}
		}
	}
	return false
}

// checkNoSharedHardware: no two live claims hold the same hardware, by
// what they were allocated, whatever their devices are called now.
func (p *prop) checkNoSharedHardware() {
	claims := make([]*liveClaim, 0, len(p.live))
	for _, lc := range p.live {
		claims = append(claims, lc)
	}
	for i := range claims {
		for j := range i {
			if claimsConflict(claims[i], claims[j]) {
				p.fail("claims %s (%v) and %s (%v) hold the same hardware", claims[i].c.UID, claims[i].devices, claims[j].c.UID, claims[j].devices)
			}
		}
	}
}

// checkOwnHardware: a restored claim's record names the hardware it was
// allocated, not what its device's name means now, and its CDI spec gives
// the container those GPUs' device files and no other GPU's.
func (p *prop) checkOwnHardware(lc *liveClaim, rec checkpoint.PreparedClaim) {
	spec, err := os.ReadFile(p.n.cdi.SpecPath(lc.c.UID))
	if err != nil {
		p.fail("claim %s's CDI spec: %v", lc.c.UID, err)
	}
	own := map[string]bool{}
	for _, held := range lc.held {
		if held.Kind != configapi.VFIO {
			own[held.GPU.UUID] = true
		}
	}
	for _, g := range p.gpus {
		if has := bytes.Contains(spec, []byte(strconv.Quote(p.n.sim.DevicePath(g.Minor)))); has != own[g.UUID] {
			p.fail("claim %s (allocated %v) on GPUs %v: its CDI spec has GPU %s's device file (minor %d): %v", lc.c.UID, lc.devices, own, g.UUID, g.Minor, has)
		}
	}
	for _, d := range rec.Devices {
		i := slices.Index(lc.devices, d.Device)
		if i < 0 {
			p.fail("claim %s's record names device %s, which it was not allocated (%v)", lc.c.UID, d.Device, lc.devices)
		}
		held := lc.held[i]
		if got := recordedGPU(d); got != held.GPU.UUID {
			p.fail("claim %s's device %s is on GPU %s; it was allocated on GPU %s", lc.c.UID, d.Device, got, held.GPU.UUID)
		}
		if d.Mig != nil && (d.Mig.Start != held.Placement.Start || d.Mig.Profile != held.Placement.Profile.Name) {
			p.fail("claim %s's device %s is %s at %d; it was allocated %s at %d", lc.c.UID, d.Device, d.Mig.Profile, d.Mig.Start, held.Placement.Profile.Name, held.Placement.Start)
		}
	}
}
