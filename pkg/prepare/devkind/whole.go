// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devkind

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// wholeGPU is a GPU used whole. On a GPU also offered as dynamic MIG
// devices (Partitionable) its MIG mode must be off; nothing else changes.
type wholeGPU struct{ noops }

func (wholeGPU) Configure(_ Env, rec *checkpoint.PreparedDevice, dev *Device) error {
	if dev.GPU.Device == nil {
		return vmHeld(dev)
	}
	// Admin access watches the GPU and changes nothing on it: it may sit
	// beside MIG devices of other claims (the scheduler allows it).
	if dev.Partitionable && !rec.AdminAccess {
		// A crash, or a client that kept an earlier change pending, may
		// have left MIG mode on with nothing in it; the scheduler
		// guarantees no MIG device of this GPU is allocated. A GPU in MIG
		// mode cannot be used whole, so this must succeed.
		return mig.RequireMigDisabled(dev.GPU.Device, dev.GPU.MigProfiles)
	}
	return nil
}

// NothingToUndo: MIG mode off is how any holder of the whole GPU wants
// it, and Release leaves it so.
func (wholeGPU) NothingToUndo() bool { return true }

func (wholeGPU) Matches(rec checkpoint.PreparedDevice, dev *Device) error {
	if rec.Mig != nil || rec.Vfio != nil {
		return fmt.Errorf("the node now publishes %s as a whole GPU, not as the recorded device", dev.Name)
	}
	return sameGPU(rec, dev)
}

func (wholeGPU) Memory(dev *Device) int64 { return int64(dev.GPU.MemoryBytes) }

func (wholeGPU) ShareTarget(dev *Device) string { return dev.GPU.UUID }

func (wholeGPU) OwnsTimeSlice() bool { return true }

func (wholeGPU) Watch(pool string, dev *Device) health.Device { return watchGPU(pool, dev) }

// vmHeld is the error for a device whose GPU is published from a VM's
// record (pkg/driver WithPassthroughGPUs): NVML cannot reach it, and the
// ledger keeps claims off it until it is back.
func vmHeld(dev *Device) error {
	return fmt.Errorf("GPU %s is bound to vfio-pci for a VM; NVML cannot reach it until it is back", dev.GPU.PCIBusID)
}

// monitor is a GPU published a second time, without counters, for
// admin-access requests (deviceattr.TypeMonitor): monitoring agents on
// a GPU that runs workloads, MIG devices included. Preparing it gives the
// container the GPU as an admin-access whole GPU gets it and changes
// nothing: no MIG mode, no MIG devices, no sharing. It never conflicts
// with other claims on its GPU (admin access), and unprepare has nothing
// to undo but the claim's CDI spec and record.
type monitor struct{ wholeGPU }

// Plan refuses a monitor device allocated without admin access: nothing
// keeps such an allocation off a GPU that a workload uses.
func (monitor) Plan(dev *Device, r resourceapi.DeviceRequestAllocationResult) error {
	if r.AdminAccess != nil && *r.AdminAccess {
		return nil
	}
	return fmt.Errorf("device %s (request %q) is the monitor device of GPU %s, which is only for admin access: "+
		"request it with adminAccess: true, in a namespace labelled resource.kubernetes.io/admin-access: \"true\"; "+
		"for a GPU of the workload's own, use a whole GPU or a MIG device; nothing was prepared", dev.Name, r.Request, dev.GPU.UUID)
}

// CheckSharing refuses a sharing config: the claim watches the GPU and
// changes nothing on it.
func (monitor) CheckSharing(dev *Device) error {
	return fmt.Errorf("sharing: monitor device %s watches GPU %s and changes nothing on it, sharing included; leave sharing out of its config", dev.Name, dev.GPU.UUID)
}

func (monitor) Configure(_ Env, _ *checkpoint.PreparedDevice, dev *Device) error {
	if dev.GPU.Device == nil {
		return vmHeld(dev)
	}
	return nil
}

func (monitor) OwnsTimeSlice() bool { return false }

// Rebuild: the GPU itself, offered whole.
func (wholeGPU) Rebuild(rec checkpoint.PreparedDevice, g *nvdev.GPU, partitionable bool, _ *Device) (*Device, error) {
	return &Device{Name: rec.Device, Kind: configapi.WholeGPU, GPU: g, Partitionable: partitionable}, nil
}

// Rebuild: the GPU seen again; a monitor device never touches MIG mode.
func (monitor) Rebuild(rec checkpoint.PreparedDevice, g *nvdev.GPU, _ bool, _ *Device) (*Device, error) {
	return &Device{Name: rec.Device, Kind: configapi.Monitor, GPU: g}, nil
}
