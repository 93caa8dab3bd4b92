// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
)

// configureDevice does the device-side work of prepare. The caller holds
// the lock of the device's GPU.
// addrTrusted says the record's PCI addresses were read from the live GPUs
// in this boot (State.addressTrusted).
func (s *State) configureDevice(rec *checkpoint.PreparedDevice, dev *AllocatableDevice, addrTrusted bool) error {
	if dev.GPU.Device == nil && dev.Kind != configapi.VFIO {
		// Published from a passthrough record (pkg/driver
		// WithPassthroughGPUs); reserve keeps claims off it until then.
		return fmt.Errorf("GPU %s is bound to vfio-pci for a VM; NVML cannot reach it until it is back", dev.GPU.PCIBusID)
	}
	switch dev.Kind {
	case configapi.WholeGPU:
		// Admin access watches the GPU and changes nothing on it: it may
		// sit beside MIG devices of other claims (the scheduler allows it).
		if dev.Partitionable && !rec.AdminAccess {
			// A crash, or a client that kept an earlier change pending, may
			// have left MIG mode on with nothing in it; the scheduler
			// guarantees no MIG device of this GPU is allocated. A GPU in
			// MIG mode cannot be used whole, so this must succeed.
			return mig.RequireMigDisabled(dev.GPU.Device, dev.GPU.MigProfiles)
		}
		return nil
	case configapi.DynamicMIG:
		inst, err := mig.Create(dev.GPU.Device, dev.Placement)
		if err != nil {
			return err
		}
		rec.UUID, rec.Mig.GIID, rec.Mig.CIID = inst.UUID, inst.GIID, inst.CIID
		return nil
	case configapi.VFIO:
		return s.bindVFIO(rec, dev, addrTrusted)
	default:
		return nil
	}
}

// releaseDevice undoes configureDevice. It is idempotent: it runs again
// after a crash, and on records of devices that were never created.
func (s *State) releaseDevice(rec checkpoint.PreparedDevice, addrTrusted bool) error {
	if rec.Vfio != nil {
		return s.unbindVFIO(rec, addrTrusted)
	}
	if rec.Mig == nil || !rec.Mig.Dynamic || rec.Mig.GIID < 0 {
		return nil
	}
	dev, ok := s.Devices[rec.Device]
	if !ok || dev.GPU.Device == nil {
		return fmt.Errorf("device is no longer published; its MIG instance is cleaned up at the next start")
	}
	if err := mig.DestroyAt(dev.GPU.Device, dev.Placement, rec.Mig.GIID, rec.Mig.CIID); err != nil {
		return err
	}
	// Return the GPU to non-MIG mode when nothing is left, so it can be
	// used whole again (never on GPUs that need a reset for it).
	return mig.DisableIfEmpty(dev.GPU.Device, dev.GPU.MigProfiles)
}
