// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

// The start-up cleanup of what no prepared claim owns: MIG devices a crash
// left between "created" and "checkpointed", and MPS daemons no record
// uses. Each decides ownership from the ledger under the lock of the
// parent GPU, the lock prepare and unprepare hold (issue 47).

import (
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// destroyUnownedMig removes MIG devices on dynamically partitioned GPUs
// that no prepared claim owns: what a crash between "created" and
// "checkpointed" leaves behind.
func (s *State) destroyUnownedMig(logger klog.Logger, report *RecoveryReport) int {
	if s.Ledger.View().Opaque() {
		logger.Info("A newer driver's record cannot be read: leaving every MIG device as it is")
		return 0
	}
	destroyed := 0
	seen := map[string]bool{}
	for _, dev := range s.Devices {
		// Every GPU offered for dynamic MIG, including those (Ampere) not
		// also published whole. A failure on one GPU leaves the others.
		gpu := dev.GPU
		if !dev.Behavior().PartitionsGPU() || seen[gpu.UUID] || gpu.Device == nil {
			// No handle: the GPU is a VM's (passthrough.go), and has no
			// MIG device NVML could list.
			continue
		}
		seen[gpu.UUID] = true
		destroyed += s.destroyUnownedMigOn(logger, report, gpu)
	}
	return destroyed
}

// destroyUnownedMigOn is destroyUnownedMig on one GPU, under the GPU's
// lock, with the ledger read under it: every start-up cleanup decides
// ownership so.
func (s *State) destroyUnownedMigOn(logger klog.Logger, report *RecoveryReport, gpu *nvdev.GPU) int {
	defer s.deviceLocks.Lock(gpu.UUID)()
	v := s.Ledger.View()
	if v.Opaque() {
		return 0
	}
	owned := v.OwnedMig()
	existing, err := nvdev.ExistingMigDevices(gpu.Device, gpu.MigProfiles)
	if err != nil {
		report.problem(logger, err, "Listing MIG devices", "gpu", gpu.UUID)
		return 0
	}
	destroyed := 0
	for _, m := range existing {
		if owned[ledger.MigKey{Parent: gpu.UUID, GIID: m.GIID}] {
			continue
		}
		if err := mig.Destroy(gpu.Device, m.GIID, m.CIID); err != nil {
			report.problem(logger, err, "Destroying a MIG device no claim owns", "gpu", gpu.UUID, "gpuInstance", m.GIID)
			continue
		}
		destroyed++
	}
	if err := mig.DisableIfEmpty(gpu.Device, gpu.MigProfiles); err != nil {
		report.problem(logger, err, "Turning MIG mode off on an empty GPU", "gpu", gpu.UUID)
	}
	return destroyed
}

// stopUnownedMPS stops MPS daemons that no prepared claim uses, e.g. those
// of a claim whose record was damaged and moved aside. Whether a daemon is
// owned is read under the lock of its GPU (a MIG device's parent: gpuOf),
// the one prepare and unprepare hold: a daemon a prepare started before
// its record names it (a dynamic MIG device's) is not taken for unowned. A GPU whose lock is busy is left
// for the next pass rather than waited for: a prepare can wait long for
// its daemon.
func (s *State) stopUnownedMPS(logger klog.Logger, report *RecoveryReport) int {
	if s.Sharing == nil || s.Sharing.MPS == nil {
		return 0
	}
	stopped := 0
	for _, d := range s.Sharing.MPS.Daemons() {
		gpu, known := s.gpuOf(d.DeviceUUID)
		if !known {
			continue
		}
		unlock, ok := s.deviceLocks.TryLock(gpu)
		if !ok {
			continue
		}
		v := s.Ledger.View()
		if v.Opaque() {
			unlock()
			logger.Info("A newer driver's record cannot be read: leaving every MPS daemon as it is")
			return stopped
		}
		if v.MPSTargets()[d.DeviceUUID] {
			unlock()
			continue
		}
		err := s.Sharing.MPS.Stop(d)
		unlock()
		if err != nil {
			report.problem(logger, err, "Stopping MPS daemon no claim uses", "device", d.DeviceUUID)
			continue
		}
		stopped++
	}
	return stopped
}

// gpuOf is the lock key of the GPU a device UUID (a GPU's or a MIG
// device's) belongs to: its parent GPU for a MIG device, found by what
// the node publishes, by the records, and else by the MIG devices that
// exist now on each GPU: a dynamic MIG device that a prepare is making has
// a UUID from its creation on, and its record names it only once its MPS
// daemon is up. The UUID itself when nothing knows it (the device is gone,
// so nothing is making it). It reports false when it cannot tell yet: a
// GPU it would look at is busy (a prepare or unprepare holds its lock, and
// may be making that MIG device), so the caller looks again next time.
func (s *State) gpuOf(uuid string) (string, bool) {
	gpus := map[string]*nvdev.GPU{}
	for _, dev := range s.Devices {
		if dev.GPU.UUID == uuid || (dev.StaticUUID != "" && dev.StaticUUID == uuid) {
			return dev.LockKey(), true
		}
		gpus[dev.GPU.UUID] = dev.GPU
	}
	for _, rec := range s.Ledger.View().Records() {
		for _, d := range rec.Devices {
			if d.UUID == uuid && d.Mig != nil {
				return d.Mig.ParentUUID, true
			}
		}
	}
	for _, g := range gpus {
		if len(g.MigProfiles) == 0 {
			continue
		}
		// The GPU's handle is read, and NVML asked, under its lock (a VM's
		// GPU coming back gets a new handle under it).
		unlock, ok := s.deviceLocks.TryLock(g.UUID)
		if !ok {
			return "", false
		}
		found := false
		if g.Device != nil {
			if existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles); err == nil { // else MIG mode off: none there
				for _, m := range existing {
					found = found || m.UUID == uuid
				}
			}
		}
		unlock()
		if found {
			return g.UUID, true
		}
	}
	return uuid, true
}
