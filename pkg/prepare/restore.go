// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
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
// configuration: the record is of an earlier boot, or a device is no
// longer configured as recorded, by its kind's own check (a MIG device
// gone after a GPU reset, a VM's GPU back on nvidia).
func (s *State) configuredAway(rec checkpoint.PreparedClaim) bool {
	if rec.State == checkpoint.RestorePending {
		return true
	}
	if rec.BootID != "" && s.BootID != "" && rec.BootID != s.BootID {
		return true
	}
	env := s.env(s.addressTrusted(rec))
	for _, d := range rec.Devices {
		// Checked on the record's own hardware (liveDevice), wherever its
		// name points now.
		if !devkind.OfRecord(d).StillConfigured(env, d, s.liveDeviceOrNil(d)) {
			return true
		}
	}
	return false
}

// restore makes a kept claim's devices what its record says they are.
// Every device is found on the node by identity first (liveDevice: the GPU
// by UUID, a MIG device by parent and placement, a VM's GPU by UUID and
// address), whatever the boot and whatever its name means now. A claim
// whose devices lost their configuration is configured again at its
// recorded placements (adopting a MIG device already there, restoreMig),
// its time slices set again (MPS daemons are left to the supervisor, so
// that start never waits for one), and its CDI spec rewritten. A claim
// whose devices kept their configuration is left as it is, hardware
// included: only a CDI spec that is missing, damaged or written for other
// device files than its hardware's now (the GPUs were renumbered by a
// driver reload) is rewritten. A claim whose hardware is gone fails, and
// its spec, which may name another claim's device file now, goes. On
// failure the claim is marked unrestored, what this attempt configured is
// undone and nothing else: the claim keeps its record and its hardware
// (it stays held) until the kubelet unprepares it. The caller holds the
// claim's locks, or runs before the kubelet is served.
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
	// staleSpec: the claim's CDI spec may name device files that are
	// not its hardware's (its hardware is gone, or moved and the spec
	// could not be written again): a failure removes it.
	staleSpec bool
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
	planned := make([]plannedDevice, 0, len(a.rec.Devices))
	for i := range a.rec.Devices {
		d := &a.rec.Devices[i]
		// GPUs are named by minor: after a reboot or a driver reload the
		// name can mean another GPU, or another placement, or nothing. The
		// claim keeps its own hardware (the ledger holds it by UUID) and
		// never gets that device's.
		dev, err := s.liveDevice(*d)
		if err != nil {
			a.staleSpec = true
			return s.failRestore(a, err)
		}
		var extra extraEdits
		if reconfigure {
			made, err := s.reconfigureDevice(a.rec, d, dev)
			if made {
				a.created = append(a.created, i)
			}
			if err != nil {
				return s.failRestore(a, fmt.Errorf("device %s: %w", d.Device, err))
			}
			extra, err = s.sharingEdits(d.Sharing, true)
			if d.Sharing != nil && d.Sharing.Strategy == configapi.TimeSlicingStrategy {
				a.timeSlices = append(a.timeSlices, i)
			}
			if err != nil {
				return s.failRestore(a, fmt.Errorf("device %s: %w", d.Device, err))
			}
		}
		planned = append(planned, plannedDevice{device: dev, extra: extra})
	}
	if !reconfigure {
		if s.specCurrent(a.rec, planned) {
			// Nothing to configure and nothing to write: the spec names
			// the claim's hardware as it is now. A device no longer
			// published under its name keeps its hardware and the pod
			// keeps running (RecoverLocal reports it: movedDevices).
			s.Ledger.Restored(rec.UID)
			return nil
		}
		// Missing, damaged, or written for other device files: from here
		// on the spec on disk is not to be kept should this attempt fail.
		a.staleSpec = true
		for i := range planned {
			extra, err := s.sharingEdits(a.rec.Devices[i].Sharing, false)
			if err != nil {
				return s.failRestore(a, fmt.Errorf("device %s: %w", a.rec.Devices[i].Device, err))
			}
			planned[i].extra = extra
		}
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

// locateVMGPUs updates each device of a claim with where its hardware is
// now (a VM's GPU's PCI address: its kind's Locate) and reports whether
// every one was found.
func (s *State) locateVMGPUs(rec *checkpoint.PreparedClaim) bool {
	located := true
	env := s.env(false)
	for i := range rec.Devices {
		if err := devkind.OfRecord(rec.Devices[i]).Locate(env, &rec.Devices[i]); err != nil {
			located = false
		}
	}
	return located
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

// reconfigureDevice configures one device of a claim again, by its
// kind: what is there as recorded is adopted, the rest configured afresh.
// It reports whether the attempt now owns a MIG device, which a failure
// must undo since the record forgot the device's IDs.
func (s *State) reconfigureDevice(rec checkpoint.PreparedClaim, d *checkpoint.PreparedDevice, dev *AllocatableDevice) (made bool, err error) {
	k, env := dev.Behavior(), s.env(s.addressTrusted(rec))
	adopted, err := k.Adopt(env, rec.UID, d, dev)
	if err == nil && !adopted {
		err = k.Configure(env, d, dev)
	}
	if err != nil {
		return false, err
	}
	made = k.PartitionsGPU()
	if d.Sharing != nil && d.Sharing.Target == "" {
		d.Sharing.Target = d.UUID
	}
	return made, nil
}

// failRestore undoes what a failed restore attempt configured (the MIG
// devices it made or adopted, the time slices it set) and marks the
// claim. Nothing else is touched: a claim whose devices kept their
// configuration keeps its CDI spec, unless that spec is not its
// hardware's (staleSpec). The record
// stays, and the claim keeps holding its devices, so that the kubelet's
// unprepare finds it and a later start or prepare tries again.
func (s *State) failRestore(a *restoreAttempt, cause error) error {
	rec := a.rec
	for _, i := range a.timeSlices {
		_ = s.releaseSharing(rec.UID, rec.Devices[i].Sharing)
	}
	env := s.env(s.addressTrusted(rec))
	for _, i := range a.created {
		d := rec.Devices[i]
		if dev := s.liveDeviceOrNil(d); dev != nil {
			_ = dev.Behavior().Release(env, d, dev)
		}
	}
	if a.reconfigure || a.staleSpec {
		// The spec names devices as they were before the reboot, reset or
		// driver reload: their files may be another claim's now.
		_ = s.CDI.Remove(rec.UID)
	}
	if a.reconfigure {
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
