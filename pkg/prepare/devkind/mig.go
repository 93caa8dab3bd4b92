// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devkind

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// migDevice is what static and dynamic MIG devices share: a placement of
// memory slices on a parent GPU, the profile's memory, and no time slice
// of their own (the slice belongs to the parent GPU: NVIDIA's driver sets
// it on full GPUs only, k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/
// sharing.go).
type migDevice struct{ noops }

// Matches refuses a published device at another placement, of another
// profile or on another GPU than the recorded MIG device.
func (migDevice) Matches(rec checkpoint.PreparedDevice, dev *Device) error {
	m := rec.Mig
	if m == nil || m.Profile != dev.Placement.Profile.Name || m.Start != dev.Placement.Start || m.ParentUUID != dev.GPU.UUID {
		return fmt.Errorf("the node now publishes %s as another device than the recorded one (%s)", dev.Name, describeRecord(rec))
	}
	return nil
}

func describeRecord(rec checkpoint.PreparedDevice) string {
	if rec.Mig == nil {
		return "a whole GPU " + rec.UUID
	}
	return fmt.Sprintf("%s MIG device at start %d of GPU %s", rec.Mig.Profile, rec.Mig.Start, rec.Mig.ParentUUID)
}

func (migDevice) Describe(d *cdi.Device, _ checkpoint.PreparedDevice, dev *Device) {
	d.ParentUUID = dev.GPU.UUID
	d.MigProfile = dev.Placement.Profile.Name
}

func (migDevice) Memory(dev *Device) int64 {
	return int64(dev.Placement.Profile.Info.MemorySizeMB) << 20
}

// staticMIG is a MIG device an admin made: used as it is, never created or
// destroyed here.
type staticMIG struct{ migDevice }

func (staticMIG) Record(rec *checkpoint.PreparedDevice, dev *Device) {
	rec.UUID = dev.StaticUUID
	rec.Mig = &checkpoint.MigRecord{ParentUUID: dev.GPU.UUID, Profile: dev.Placement.Profile.Name, Start: dev.Placement.Start, Size: dev.Placement.Size, GIID: dev.GIID, CIID: dev.CIID}
}

func (staticMIG) Configure(_ Env, _ *checkpoint.PreparedDevice, dev *Device) error {
	if dev.GPU.Device == nil {
		return vmHeld(dev)
	}
	return nil
}

// NothingToUndo: the admin's device is used as it is.
func (staticMIG) NothingToUndo() bool { return true }

// StillConfigured: the admin's MIG devices come back (if at all) with new
// UUIDs after a reboot.
func (staticMIG) StillConfigured(_ Env, rec checkpoint.PreparedDevice, dev *Device) bool {
	return dev == nil || rec.UUID == dev.StaticUUID
}

// Adopt: the admin's device, at the recorded placement (Matches), with the
// identity it has now.
func (staticMIG) Adopt(_ Env, _ types.UID, rec *checkpoint.PreparedDevice, dev *Device) (bool, error) {
	old := rec.UUID
	rec.UUID, rec.Mig.GIID, rec.Mig.CIID = dev.StaticUUID, dev.GIID, dev.CIID
	if rec.Sharing != nil && rec.Sharing.Target == old {
		rec.Sharing.Target = dev.StaticUUID
	}
	return true, nil
}

func (staticMIG) ShareTarget(dev *Device) string { return dev.StaticUUID }

// Watch: a static MIG device's instance exists at start, so its own
// faults are known by instance.
func (staticMIG) Watch(pool string, dev *Device) health.Device {
	w := watchGPU(pool, dev)
	w.MIG, w.Instance = true, &[2]uint32{uint32(dev.GIID), uint32(dev.CIID)}
	return w
}

// dynamicMIG is a MIG device made at prepare at the placement the
// scheduler chose, and destroyed at unprepare (MIG mode goes off with the
// last one, where that needs no reset).
type dynamicMIG struct{ migDevice }

func (dynamicMIG) Record(rec *checkpoint.PreparedDevice, dev *Device) {
	rec.UUID = "" // known once created
	rec.Mig = &checkpoint.MigRecord{ParentUUID: dev.GPU.UUID, Profile: dev.Placement.Profile.Name, Start: dev.Placement.Start, Size: dev.Placement.Size, Dynamic: true, GIID: -1, CIID: -1}
}

func (dynamicMIG) Configure(_ Env, rec *checkpoint.PreparedDevice, dev *Device) error {
	if dev.GPU.Device == nil {
		return vmHeld(dev)
	}
	inst, err := mig.Create(dev.GPU.Device, dev.Placement)
	if err != nil {
		return err
	}
	rec.UUID, rec.Mig.GIID, rec.Mig.CIID = inst.UUID, inst.GIID, inst.CIID
	return nil
}

// Release destroys the MIG device. One on a GPU that is no longer
// published (fell off the bus) went with it, or is destroyed as unowned
// when it returns.
func (dynamicMIG) Release(_ Env, rec checkpoint.PreparedDevice, dev *Device) error {
	if rec.Mig == nil || rec.Mig.GIID < 0 || dev == nil {
		return nil
	}
	if dev.GPU.Device == nil {
		return fmt.Errorf("device is no longer published; its MIG instance is cleaned up at the next start")
	}
	if err := mig.DestroyAt(dev.GPU.Device, dev.Placement, rec.Mig.GIID, rec.Mig.CIID); err != nil {
		return err
	}
	// Return the GPU to non-MIG mode when nothing is left, so it can be
	// used whole again (never on GPUs that need a reset for it).
	return mig.DisableIfEmpty(dev.GPU.Device, dev.GPU.MigProfiles)
}

// StillConfigured: the recorded MIG device still exists where the record
// says, with the recorded UUID (a reboot, a GPU reset or a driver reload
// takes it away).
func (dynamicMIG) StillConfigured(_ Env, rec checkpoint.PreparedDevice, dev *Device) bool {
	if dev == nil || rec.Mig == nil || rec.Mig.GIID < 0 || dev.GPU.Device == nil {
		return true
	}
	if current, _, ret := dev.GPU.Device.GetMigMode(); ret == nvml.SUCCESS && current != nvml.DEVICE_MIG_ENABLE {
		return false // MIG mode off: no MIG device at all
	}
	existing, err := nvdev.ExistingMigDevices(dev.GPU.Device, dev.GPU.MigProfiles)
	if err != nil {
		return true // cannot tell; keep the record as it is
	}
	for _, m := range existing {
		// The same instance, by identity: a MIG device made again at the
		// same place (after a driver reload) has another UUID, and the
		// spec and the MPS daemon name the recorded one.
		if m.GIID == rec.Mig.GIID && m.CIID == rec.Mig.CIID && m.Placement.Start == rec.Mig.Start && m.Profile.Name == rec.Mig.Profile && (rec.UUID == "" || m.UUID == rec.UUID) {
			return true
		}
	}
	return false
}

// Adopt takes over a MIG device that sits at the recorded placement with
// the recorded profile and that no record owns: one an earlier restore of
// this claim made before the plugin was killed. Otherwise Configure makes
// it again; on a GPU whose MIG mode changes only with a reset (Ampere) and
// that came back with MIG mode off, that fails and says so.
func (dynamicMIG) Adopt(env Env, uid types.UID, rec *checkpoint.PreparedDevice, dev *Device) (bool, error) {
	return adopt(env, uid, rec, dev)
}

func adopt(env Env, uid types.UID, rec *checkpoint.PreparedDevice, dev *Device) (bool, error) {
	v := env.Owners()
	if v.Opaque() || dev.GPU.Device == nil {
		return false, nil // it may be an unreadable newer record's
	}
	existing, err := nvdev.ExistingMigDevices(dev.GPU.Device, dev.GPU.MigProfiles)
	if err != nil {
		return false, nil // MIG mode off, or unknown: create as usual
	}
	for _, m := range existing {
		if m.Placement.Start != rec.Mig.Start || m.Profile.Name != rec.Mig.Profile {
			continue
		}
		if owner, owned := v.MigOwner(dev.GPU.UUID, m.GIID); owned && owner != uid {
			return false, nil // another claim's: creating fails and says so
		}
		inst, err := mig.Adopt(dev.GPU.Device, dev.Placement, m.GIID, m.CIID)
		if err != nil {
			return false, err
		}
		rec.UUID, rec.Mig.GIID, rec.Mig.CIID = inst.UUID, inst.GIID, inst.CIID
		return true, nil
	}
	return false, nil
}

func (dynamicMIG) ShareTarget(*Device) string { return "" }

func (dynamicMIG) PartitionsGPU() bool { return true }

// Watch: a dynamic MIG device is an instance only while a claim holds it
// (pkg/driver asks the ledger which).
func (dynamicMIG) Watch(pool string, dev *Device) health.Device {
	w := watchGPU(pool, dev)
	w.MIG = true
	return w
}

// Rebuild: an admin's MIG device exists or does not; none is made here,
// so one the node does not publish is gone.
func (staticMIG) Rebuild(rec checkpoint.PreparedDevice, g *nvdev.GPU, _ bool, _ *Device) (*Device, error) {
	return nil, fmt.Errorf("the %s MIG device at %d of GPU %s (device %s) is no longer on this node", rec.Mig.Profile, rec.Mig.Start, g.UUID, rec.Device)
}

// Rebuild: the recorded placement on the live parent GPU.
func (dynamicMIG) Rebuild(rec checkpoint.PreparedDevice, g *nvdev.GPU, _ bool, named *Device) (*Device, error) {
	p, ok := placementOf(g, rec.Mig)
	if !ok && rec.Mig.Profile == "" && named != nil && named.Kind == configapi.DynamicMIG && named.GPU.UUID == g.UUID {
		// A record that does not say its placement (none a release
		// wrote) is taken at its name's, on its own GPU.
		return named, nil
	}
	if !ok {
		return nil, fmt.Errorf("GPU %s has no %s placement at %d for device %s", g.UUID, rec.Mig.Profile, rec.Mig.Start, rec.Device)
	}
	return &Device{Name: rec.Device, Kind: configapi.DynamicMIG, GPU: g, Placement: p}, nil
}

// placementOf is a MIG record's placement on its live parent GPU.
func placementOf(g *nvdev.GPU, m *checkpoint.MigRecord) (mig.Placement, bool) {
	if m == nil {
		return mig.Placement{}, false
	}
	for _, prof := range g.MigProfiles {
		if prof.Name != m.Profile {
			continue
		}
		for _, pl := range prof.Placements {
			if pl.Start == m.Start {
				return mig.Placement{Profile: prof, Start: pl.Start, Size: pl.Size}, true
			}
		}
	}
	return mig.Placement{}, false
}
