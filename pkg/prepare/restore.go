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

// RestoreError says why a prepared claim could not be restored after a
// reboot (or a GPU reset). Prepare of the claim fails with it until a
// restore succeeds; it is never answered from the stale record.
type RestoreError struct {
	Namespace, Name string
	UID             types.UID
	Reason          error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("claim %s/%s was prepared before the node rebooted (or its GPU was reset) and cannot be restored: %v", e.Namespace, e.Name, e.Reason)
}

func (e *RestoreError) Unwrap() error { return e.Reason }

// Unrestored lists the claims whose devices could not be restored, with
// the reason; the driver reports them on the claim's pods.
func (s *State) Unrestored() []*RestoreError {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*RestoreError, 0, len(s.unrestored))
	for _, e := range s.unrestored {
		out = append(out, e)
	}
	return out
}

// clearUnrestored forgets a claim's restore failure.
func (s *State) clearUnrestored(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unrestored, uid)
}

// setUnrestored records why a claim could not be restored and returns it.
func (s *State) setUnrestored(rec checkpoint.PreparedClaim, err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &RestoreError{Namespace: rec.Namespace, Name: rec.Name, UID: rec.UID, Reason: err}
	s.unrestored[rec.UID] = e
	return e
}

func (s *State) unrestoredErr(uid types.UID) *RestoreError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unrestored[uid]
}

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

// restore makes a kept claim's devices what its record says they are and
// holds them. A claim whose devices lost their configuration is configured
// again at its recorded placements; any claim's sharing is put back (MPS
// daemons are left to the supervisor, so that start never waits for one)
// and its CDI spec rewritten where it is missing, damaged or stale. On
// failure nothing of the claim stays configured and the claim is marked
// unrestored. The caller holds the claim's locks, or runs before the
// kubelet is served.
func (s *State) restore(logger klog.Logger, rec checkpoint.PreparedClaim) (reconfigured bool, err error) {
	reconfigure := s.configuredAway(rec)
	return reconfigure, s.restoreAs(logger, rec, reconfigure)
}

func (s *State) restoreAs(logger klog.Logger, rec checkpoint.PreparedClaim, reconfigure bool) error {
	if reconfigure {
		logger.Info("Restoring claim whose devices lost their configuration (node reboot or GPU reset)", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID, "recordBoot", rec.BootID, "boot", s.BootID)
		// Forget identities of an earlier boot first, durably: an undo
		// must never destroy a MIG device that now belongs to another
		// claim under a reused ID.
		forgetInstances(&rec)
		rec.State = checkpoint.RestorePending
		if err := s.Store.Put(rec); err != nil {
			return s.setUnrestored(rec, err)
		}
	}
	planned := make([]plannedDevice, 0, len(rec.Devices))
	for i := range rec.Devices {
		d := &rec.Devices[i]
		dev, ok := s.Devices[d.Device]
		if !ok {
			return s.failRestore(rec, fmt.Errorf("device %s is no longer on this node", d.Device))
		}
		if reconfigure {
			if err := s.reconfigureDevice(d, dev); err != nil {
				return s.failRestore(rec, fmt.Errorf("device %s: %w", d.Device, err))
			}
		}
		extra, err := s.sharingEdits(d.Sharing)
		if err != nil {
			return s.failRestore(rec, fmt.Errorf("device %s: %w", d.Device, err))
		}
		planned = append(planned, plannedDevice{device: dev, extra: extra})
	}
	if reconfigure || !s.specIntact(rec.UID) {
		logger.Info("Writing CDI spec from the checkpoint", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
		if reconfigure {
			rec.BootID, rec.State = s.BootID, checkpoint.PrepareCompleted
		}
		if err := s.writeSpec(rec, planned); err != nil {
			return s.failRestore(rec, fmt.Errorf("write CDI spec: %w", err))
		}
	}
	if reconfigure {
		if err := s.Store.Put(rec); err != nil {
			return s.failRestore(rec, err)
		}
	}
	s.hold(rec)
	s.clearUnrestored(rec.UID)
	// The claim's device status is written by RemoveStale, from the
	// ResourceClaim the API server returns (and by the kubelet's prepare).
	return nil
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

// reconfigureDevice configures one device of a claim again. The record's
// placement must be the published device's: a device name that now means
// something else is not the claim's device.
func (s *State) reconfigureDevice(d *checkpoint.PreparedDevice, dev *AllocatableDevice) error {
	if d.Mig != nil {
		if dev.Kind == configapi.WholeGPU || d.Mig.Profile != dev.Placement.Profile.Name || d.Mig.Start != dev.Placement.Start || d.Mig.ParentUUID != dev.GPU.UUID {
			return fmt.Errorf("the node now publishes it as another device than the recorded %s MIG device at start %d of GPU %s", d.Mig.Profile, d.Mig.Start, d.Mig.ParentUUID)
		}
	}
	if dev.Kind == configapi.MIG {
		// The admin's MIG devices come back (if at all) with new UUIDs.
		old := d.UUID
		d.UUID, d.Mig.GIID, d.Mig.CIID = dev.StaticUUID, dev.GIID, dev.CIID
		if d.Sharing != nil && d.Sharing.Target == old {
			d.Sharing.Target = dev.StaticUUID
		}
		return nil
	}
	// On a GPU whose MIG mode changes only with a reset (Ampere) and
	// that came back with MIG mode off, this fails and says so.
	if err := s.configureDevice(d, dev); err != nil {
		return err
	}
	if d.Sharing != nil && d.Sharing.Target == "" {
		d.Sharing.Target = d.UUID
	}
	return nil
}

// failRestore undoes what a failed restore configured and marks the claim.
// The record stays (with no MIG identity), so that the kubelet's unprepare
// finds it and a later start or prepare tries again.
func (s *State) failRestore(rec checkpoint.PreparedClaim, cause error) error {
	for _, d := range rec.Devices {
		if d.Mig == nil || !d.Mig.Dynamic || d.Mig.GIID < 0 {
			continue
		}
		if dev, ok := s.Devices[d.Device]; ok {
			_ = mig.Destroy(dev.GPU.Device, d.Mig.GIID, d.Mig.CIID)
		}
	}
	_ = s.CDI.Remove(rec.UID)
	forgetInstances(&rec)
	rec.State = checkpoint.RestorePending
	_ = s.Store.Put(rec)
	s.releaseHeld(rec.UID)
	return s.setUnrestored(rec, cause)
}

// sharingEdits puts a recorded sharing setting back without waiting for
// anything: a time slice is set again; an MPS daemon is only named (its
// CDI edits need no running daemon) and started by the supervisor.
func (s *State) sharingEdits(rec *checkpoint.SharingRecord) (extraEdits, error) {
	if rec == nil || s.Sharing == nil {
		return extraEdits{}, nil
	}
	if rec.Strategy == configapi.MpsStrategy {
		if s.Sharing.MPS == nil {
			return extraEdits{}, fmt.Errorf("the record uses MPS, which this node does not run")
		}
		return mpsEdits(s.Sharing.MPS, rec)
	}
	return s.applySharing(rec)
}
