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
		if !devkind.OfRecord(d).StillConfigured(env, d, s.Devices[d.Device]) {
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
		// GPUs are named by minor: after a reboot or a driver reload the
		// name can mean another GPU, or another placement. The claim keeps
		// its own hardware (the ledger holds it by UUID) and never gets
		// that device's.
		if err := dev.Behavior().Matches(*d, dev); err != nil {
			return s.failRestore(a, err)
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
// claim. Nothing else is touched: a claim
// whose devices kept their configuration keeps its CDI spec. The record
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
		if dev, ok := s.Devices[d.Device]; ok {
			_ = dev.Behavior().Release(env, d, dev)
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
