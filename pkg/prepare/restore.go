// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// A reboot keeps the checkpoint (it is on disk) but takes away everything
// the claims' devices were configured with: MIG instances are not
// persistent across reboots (NVIDIA MIG User Guide, "Getting Started with
// MIG": created GPU and compute instances do not survive a reboot; MIG mode
// itself does only on GPUs that store it), compute policies go back to
// their defaults, MPS daemons are gone, and the CDI directory is a tmpfs.
// The kubelet keeps its own checkpoint and may never call prepare again for
// a claim it believes prepared, so every claim is restored at start: the
// same devices, configured again, under a CDI spec that names them as they
// are now (a re-created MIG device has a new UUID).

// RestoreError says why a prepared claim could not be restored; the ledger
// keeps it (pkg/ledger).
type RestoreError = ledger.RestoreError

// Unrestored lists the claims whose devices could not be restored, with
// the reason; the driver reports them on the claim's pods.
func (s *State) Unrestored() []*RestoreError { return s.Ledger.Unrestored() }

// configuredAway reports whether a prepared claim's devices lost their
// configuration: the record is of an earlier boot, or a MIG device it
// names is no longer there (a GPU reset, or a record from before boot IDs
// were recorded).
func (s *State) configuredAway(rec checkpoint.PreparedClaim) bool {
	if rec.State == checkpoint.RestorePending {
		return true
	}
	if rec.BootID != "" && s.BootID != "" && rec.BootID != s.BootID {
		return true
	}
	for _, d := range rec.Devices {
		if s.vfioAway(d) {
			return true
		}
		dev, ok := s.Devices[d.Device]
		if !ok || d.Mig == nil {
			continue
		}
		switch dev.Kind {
		case configapi.DynamicMIG:
			if d.Mig.GIID >= 0 && !migPresent(dev, d) {
				return true
			}
		case configapi.MIG:
			if d.UUID != dev.StaticUUID {
				return true
			}
		}
	}
	return false
}

// migPresent reports whether the recorded dynamic MIG device still exists
// where the record says.
func migPresent(dev *AllocatableDevice, d checkpoint.PreparedDevice) bool {
	if current, _, ret := dev.GPU.Device.GetMigMode(); ret == nvml.SUCCESS && current != nvml.DEVICE_MIG_ENABLE {
		return false // MIG mode off: no MIG device at all
	}
	existing, err := nvdev.ExistingMigDevices(dev.GPU.Device, dev.GPU.MigProfiles)
	if err != nil {
		return true // cannot tell; keep the record as it is
	}
	for _, m := range existing {
		if m.GIID == d.Mig.GIID && m.CIID == d.Mig.CIID && m.Placement.Start == d.Mig.Start && m.Profile.Name == d.Mig.Profile {
			return true
		}
	}
	return false
}

// restore makes a kept claim's devices what its record says they are. A
// claim whose devices lost their configuration is configured again at its
// recorded placements (adopting a MIG device already there, restoreMig),
// its time slices set again (MPS daemons are left to the supervisor, so
// that start never waits for one), and its CDI spec rewritten. A claim
// whose devices kept their configuration is left as it is, hardware
// included: only a missing or damaged CDI spec is rewritten. On failure
// the claim is marked unrestored, what this attempt configured is undone
// and nothing else: the claim keeps its record and its hardware (it stays
// held) until the kubelet unprepares it. The caller holds the claim's
// locks, or runs before the kubelet is served.
func (s *State) restore(logger klog.Logger, rec checkpoint.PreparedClaim) (reconfigured bool, err error) {
	reconfigure := s.configuredAway(rec)
	return reconfigure, s.restoreAs(logger, rec, reconfigure)
}

// restoreAttempt is what one restore configured, so that a failure undoes
// exactly that.
type restoreAttempt struct {
	rec         checkpoint.PreparedClaim
	reconfigure bool
	created     []int // devices whose MIG device this attempt made
	timeSlices  []int // devices whose time slice this attempt set
}

func (s *State) restoreAs(logger klog.Logger, rec checkpoint.PreparedClaim, reconfigure bool) error {
	// The claim held its devices all along (pkg/ledger); a record that
	// overlaps another holder's anyway (a record rebuilt from a CDI spec,
	// or one written by a release with an ownership bug) is refused rather
	// than configured under, at start as on the kubelet's retry.
	if err := s.Ledger.CheckHeld(rec); err != nil {
		return s.Ledger.MarkUnrestored(rec, reconfigure, err)
	}
	if reconfigure {
		logger.Info("Restoring claim whose devices lost their configuration (node reboot or GPU reset)", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID, "recordBoot", rec.BootID, "boot", s.BootID)
		// Forget identities of an earlier boot first, durably: an undo
		// must never destroy a MIG device that now belongs to another
		// claim under a reused ID.
		forgetInstances(&rec)
		rec.State = checkpoint.RestorePending
		if s.locateVMGPUs(&rec) {
			// From this write on, the record's addresses are this boot's.
			rec.BootID = s.BootID
		}
		if err := s.Ledger.Record(rec); err != nil {
			return s.Ledger.MarkUnrestored(rec, true, err)
		}
	}
	a := &restoreAttempt{rec: rec, reconfigure: reconfigure}
	if !reconfigure && s.specIntact(rec.UID) {
		// Nothing to configure and nothing to write: a device no longer
		// offered (a lost GPU, a chart value changed) keeps its claim's
		// other devices as they are, and the pod keeps running
		// (RecoverLocal reports it: missingDevices).
		s.Ledger.Restored(rec.UID)
		return nil
	}
	planned := make([]plannedDevice, 0, len(a.rec.Devices))
	for i := range a.rec.Devices {
		d := &a.rec.Devices[i]
		dev, ok := s.Devices[d.Device]
		if !ok {
			return s.failRestore(a, fmt.Errorf("device %s is no longer on this node", d.Device))
		}
		if gpu := ledger.Of(*d).GPU; gpu != "" && gpu != dev.GPU.UUID {
			// GPUs are named by minor: after a reboot or a driver reload
			// the name can mean another GPU. The claim keeps its own GPU
			// (the ledger holds it by UUID) and never gets that one.
			return s.failRestore(a, fmt.Errorf("device %s is now GPU %s, not the claim's GPU %s (GPUs were renumbered)", d.Device, dev.GPU.UUID, gpu))
		}
		if reconfigure {
			made, err := s.reconfigureDevice(a.rec, d, dev)
			if made {
				a.created = append(a.created, i)
			}
			if err != nil {
				return s.failRestore(a, fmt.Errorf("device %s: %w", d.Device, err))
			}
		}
		extra, err := s.sharingEdits(d.Sharing, reconfigure)
		if reconfigure && d.Sharing != nil && d.Sharing.Strategy == configapi.TimeSlicingStrategy {
			a.timeSlices = append(a.timeSlices, i)
		}
		if err != nil {
			return s.failRestore(a, fmt.Errorf("device %s: %w", d.Device, err))
		}
		planned = append(planned, plannedDevice{device: dev, extra: extra})
	}
	logger.Info("Writing CDI spec from the checkpoint", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
	if reconfigure {
		a.rec.BootID, a.rec.State = s.BootID, checkpoint.PrepareCompleted
	}
	if err := s.writeSpec(a.rec, planned); err != nil {
		return s.failRestore(a, fmt.Errorf("write CDI spec: %w", err))
	}
	if reconfigure {
		if err := s.Ledger.Record(a.rec); err != nil {
			return s.failRestore(a, err)
		}
	}
	s.Ledger.Restored(rec.UID)
	// The claim's device status is written by RemoveStale, from the
	// ResourceClaim the API server returns (and by the kubelet's prepare).
	return nil
}

// locateVMGPUs makes the recorded PCI address of each VM device of a claim
// the live one of its GPU (liveAddress) and reports whether every one was
// found.
func (s *State) locateVMGPUs(rec *checkpoint.PreparedClaim) bool {
	located := true
	for i := range rec.Devices {
		if err := s.liveAddress(&rec.Devices[i]); err != nil {
			located = false
		}
	}
	return located
}

// missingDevices are the devices of a record this node no longer offers.
func (s *State) missingDevices(rec checkpoint.PreparedClaim) []string {
	var out []string
	for _, d := range rec.Devices {
		if _, ok := s.Devices[d.Device]; !ok {
			out = append(out, d.Device)
		}
	}
	return out
}

// forgetInstances clears the MIG identities of dynamic MIG devices.
func forgetInstances(rec *checkpoint.PreparedClaim) {
	for i := range rec.Devices {
		d := &rec.Devices[i]
		if d.Mig != nil && d.Mig.Dynamic {
			if d.Sharing != nil && d.Sharing.Target == d.UUID {
				d.Sharing.Target = ""
			}
			d.UUID, d.Mig.GIID, d.Mig.CIID = "", -1, -1
		}
	}
}

// reconfigureDevice configures one device of a claim again and reports
// whether it made (or adopted) a MIG device. The record's placement must be the
// published device's: a device name that now means something else is not
// the claim's device.
func (s *State) reconfigureDevice(rec checkpoint.PreparedClaim, d *checkpoint.PreparedDevice, dev *AllocatableDevice) (made bool, err error) {
	uid := rec.UID
	if d.Mig != nil {
		if dev.Kind == configapi.WholeGPU || d.Mig.Profile != dev.Placement.Profile.Name || d.Mig.Start != dev.Placement.Start || d.Mig.ParentUUID != dev.GPU.UUID {
			return false, fmt.Errorf("the node now publishes it as another device than the recorded %s MIG device at start %d of GPU %s", d.Mig.Profile, d.Mig.Start, d.Mig.ParentUUID)
		}
	}
	switch dev.Kind {
	case configapi.MIG:
		// The admin's MIG devices come back (if at all) with new UUIDs.
		old := d.UUID
		d.UUID, d.Mig.GIID, d.Mig.CIID = dev.StaticUUID, dev.GIID, dev.CIID
		if d.Sharing != nil && d.Sharing.Target == old {
			d.Sharing.Target = dev.StaticUUID
		}
		return false, nil
	case configapi.DynamicMIG:
		adopted, err := s.adoptMig(uid, d, dev)
		if err != nil {
			return false, err
		}
		if !adopted {
			// On a GPU whose MIG mode changes only with a reset (Ampere)
			// and that came back with MIG mode off, this fails and says so.
			if err := s.configureDevice(d, dev, s.addressTrusted(rec)); err != nil {
				return false, err
			}
		}
		// Made or adopted, it is this attempt's: a failure destroys it,
		// since the record forgets its IDs and nothing would own it.
		made = true
	default:
		if err := s.configureDevice(d, dev, s.addressTrusted(rec)); err != nil {
			return false, err
		}
	}
	if d.Sharing != nil && d.Sharing.Target == "" {
		d.Sharing.Target = d.UUID
	}
	return made, nil
}

// adoptMig takes over a MIG device that sits at the recorded placement
// with the recorded profile and that no record owns: one an earlier
// restore of this claim made before the plugin was killed.
func (s *State) adoptMig(uid types.UID, d *checkpoint.PreparedDevice, dev *AllocatableDevice) (bool, error) {
	v := s.Ledger.View()
	if v.Opaque() {
		return false, nil // it may be an unreadable newer record's
	}
	existing, err := nvdev.ExistingMigDevices(dev.GPU.Device, dev.GPU.MigProfiles)
	if err != nil {
		return false, nil // MIG mode off, or unknown: create as usual
	}
	for _, m := range existing {
		if m.Placement.Start != d.Mig.Start || m.Profile.Name != d.Mig.Profile {
			continue
		}
		if owner, owned := v.MigOwner(dev.GPU.UUID, m.GIID); owned && owner != uid {
			return false, nil // another claim's: creating fails and says so
		}
		inst, err := mig.Adopt(dev.GPU.Device, dev.Placement, m.GIID, m.CIID)
		if err != nil {
			return false, err
		}
		d.UUID, d.Mig.GIID, d.Mig.CIID = inst.UUID, inst.GIID, inst.CIID
		return true, nil
	}
	return false, nil
}

// failRestore undoes what a failed restore attempt configured (the MIG
// devices it made or adopted, the time slices it set) and marks the
// claim. Nothing else is touched: a claim
// whose devices kept their configuration keeps its CDI spec. The record
// stays, and the claim keeps holding its devices, so that the kubelet's
// unprepare finds it and a later start or prepare tries again.
func (s *State) failRestore(a *restoreAttempt, cause error) error {
	rec := a.rec
	for _, i := range a.timeSlices {
		_ = s.releaseSharing(rec.UID, rec.Devices[i].Sharing)
	}
	for _, i := range a.created {
		d := rec.Devices[i]
		if dev, ok := s.Devices[d.Device]; ok && d.Mig != nil && d.Mig.GIID >= 0 {
			_ = mig.DestroyAt(dev.GPU.Device, dev.Placement, d.Mig.GIID, d.Mig.CIID)
			_ = mig.DisableIfEmpty(dev.GPU.Device, dev.GPU.MigProfiles)
		}
	}
	if a.reconfigure {
		// The spec names devices as they were before the reboot or reset.
		_ = s.CDI.Remove(rec.UID)
		forgetInstances(&rec)
		rec.State = checkpoint.RestorePending
		_ = s.Ledger.Record(rec)
	}
	return s.Ledger.MarkUnrestored(rec, a.reconfigure, cause)
}

// sharingEdits puts a recorded sharing setting back without waiting for
// anything when the claim's devices lost their configuration (a time
// slice is set again), and otherwise only computes the CDI edits. An MPS
// daemon is only named (its CDI edits need no running daemon) and started
// by the supervisor.
func (s *State) sharingEdits(rec *checkpoint.SharingRecord, reconfigure bool) (extraEdits, error) {
	if rec == nil || s.Sharing == nil {
		return extraEdits{}, nil
	}
	if rec.Strategy == configapi.MpsStrategy {
		if s.Sharing.MPS == nil {
			return extraEdits{}, fmt.Errorf("the record uses MPS, which this node does not run")
		}
		return mpsEdits(s.Sharing.MPS, rec)
	}
	if !reconfigure {
		return extraEdits{}, nil // a time slice needs no CDI edit
	}
	return s.applySharing("", rec) // a time slice: no namespace involved
}
