// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package devkind holds what each kind of device does on the node when it
// is prepared, released, checked after a restart and adopted again: a
// whole GPU, a monitor device, a static or dynamic MIG device and a GPU
// passed through to a VM. pkg/prepare's reconciler runs the same steps for
// every claim and asks a device's Kind what each step means for it; this
// file is the one place that maps a kind to its implementation, so a new
// kind is one new implementation here and nothing else (sharing is a
// layer on a device of any kind, pkg/prepare/sharing.go).
package devkind

import (
	"k8s.io/apimachinery/pkg/types"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Device is a device this node publishes and can prepare.
type Device struct {
	Name string
	// Kind says what preparing the device involves (Behavior).
	Kind configapi.DeviceKind
	// GPU is the GPU itself, or the parent of a MIG device.
	GPU *nvdev.GPU
	// Partitionable is set on whole GPUs that are also offered as dynamic
	// MIG devices: their MIG mode must be off while used whole.
	Partitionable bool
	// Placement locates a MIG device; StaticUUID, GIID and CIID identify an
	// existing (static) one.
	Placement  mig.Placement
	StaticUUID string
	GIID, CIID int
	// TimeSlicedShares is the consumable-shares mode ("integer",
	// "unlimited") of a GPU whose shares are time-sliced, not run under
	// MPS; empty otherwise (resourceslices.Entry.TimeSlicedShares).
	TimeSlicedShares string
}

// LockKey serialises work on one physical GPU: MIG mode changes, GPU
// instance creation and driver binding on a GPU must not interleave.
func (d *Device) LockKey() string { return d.GPU.UUID }

// Behavior is the device's kind's implementation.
func (d *Device) Behavior() Kind { return Of(d.Kind) }

// Env is what kinds reach on the node beyond their device.
type Env struct {
	// Passthrough is nil on nodes that offer no GPU for passthrough.
	Passthrough *PassthroughConfig
	// Devices is the published device table; a GPU that comes back from
	// vfio-pci gets its new NVML handle there.
	Devices map[string]*Device
	// Owners is the ledger's view, for adopting a MIG device no record
	// owns.
	Owners func() ledger.View
	// AddrTrusted: the record's PCI addresses were read from the live GPUs
	// in this boot; otherwise they are hints only.
	AddrTrusted bool
}

// Kind is what one kind of device does at each step. Every method gets the
// device's record, which is the truth of what was done; dev is the
// published device, nil where a method says it may be.
type Kind interface {
	// Plan refuses an allocation of dev that this kind never prepares,
	// before anything is touched.
	Plan(dev *Device, r resourceapi.DeviceRequestAllocationResult) error
	// CheckSharing refuses a sharing setting on a kind that takes none.
	CheckSharing(dev *Device) error
	// Record fills in the kind's part of a device's first record.
	Record(rec *checkpoint.PreparedDevice, dev *Device)
	// Configure does the device-side work of prepare; the caller holds
	// the GPU's lock and the ledger holds the GPU for the claim.
	Configure(env Env, rec *checkpoint.PreparedDevice, dev *Device) error
	// Release undoes Configure. It is idempotent and needs only the
	// record: dev is nil when the device is no longer published.
	Release(env Env, rec checkpoint.PreparedDevice, dev *Device) error
	// StillConfigured reports whether a kept device is configured as its
	// record says (false after a reboot or a GPU reset).
	StillConfigured(env Env, rec checkpoint.PreparedDevice, dev *Device) bool
	// Matches refuses a published device that is not the recorded one
	// (another GPU under the same name after a renumbering, another
	// placement).
	Matches(rec checkpoint.PreparedDevice, dev *Device) error
	// Rebuild is the device a record describes, made from its live GPU g
	// (the parent of a MIG device), for a record whose hardware the node
	// publishes under no name: a chart value or feature gate was turned
	// off under the claim. partitionable says g is also offered as dynamic
	// MIG devices. named is the published device of the record's name, or
	// nil. It fails when the recorded hardware no longer exists on g.
	Rebuild(rec checkpoint.PreparedDevice, g *nvdev.GPU, partitionable bool, named *Device) (*Device, error)
	// Locate updates a record with where its hardware is now, before a
	// restore writes it (a VM's GPU's PCI address after a reboot).
	Locate(env Env, rec *checkpoint.PreparedDevice) error
	// Adopt takes over, for a kept device that lost its configuration,
	// what is already there as the record wants it (a MIG device an
	// interrupted earlier restore made, an admin's device with its new
	// identity); the reconciler configures the device afresh otherwise.
	Adopt(env Env, uid types.UID, rec *checkpoint.PreparedDevice, dev *Device) (adopted bool, err error)
	// Describe fills in the kind's part of the device's CDI description.
	Describe(d *cdi.Device, rec checkpoint.PreparedDevice, dev *Device)
	// Memory is the device's memory in bytes.
	Memory(dev *Device) int64
	// ShareTarget is the UUID an MPS daemon for the device serves ("" until
	// prepare makes the device); OwnsTimeSlice: a time slice set on it is
	// its own (only a whole GPU's is: the slice belongs to the GPU).
	ShareTarget(dev *Device) string
	OwnsTimeSlice() bool
	// NothingToUndo: Configure changes nothing that Release undoes (it
	// may check, or set what must be so whoever holds the GPU, such as
	// MIG mode off for a whole GPU), so that a crash during a prepare of
	// such devices without sharing leaves nothing to roll back, and the
	// prepare writes no record before its completed one (pkg/ledger
	// BeginUnwritten). A kind that does not say so gets the record first.
	NothingToUndo() bool
	// PartitionsGPU: the kind makes MIG devices on its GPU at prepare
	// (what a failed restore made or adopted is its to undo), and start
	// destroys those no record owns.
	PartitionsGPU() bool
	// Watch is what the health monitor watches of the device: faults of
	// its GPU, and of its own MIG instance where it is one.
	Watch(pool string, dev *Device) health.Device
}

// noops are the answers of a kind with nothing to do at a step; each kind
// embeds it and says only where it differs.
type noops struct{}

func (noops) Plan(*Device, resourceapi.DeviceRequestAllocationResult) error { return nil }
func (noops) CheckSharing(*Device) error                                    { return nil }
func (noops) Record(*checkpoint.PreparedDevice, *Device)                    {}
func (noops) Release(Env, checkpoint.PreparedDevice, *Device) error         { return nil }
func (noops) StillConfigured(Env, checkpoint.PreparedDevice, *Device) bool  { return true }
func (noops) Locate(Env, *checkpoint.PreparedDevice) error                  { return nil }
func (noops) Adopt(Env, types.UID, *checkpoint.PreparedDevice, *Device) (bool, error) {
	return false, nil
}
func (noops) Describe(*cdi.Device, checkpoint.PreparedDevice, *Device) {}
func (noops) OwnsTimeSlice() bool                                      { return false }
func (noops) PartitionsGPU() bool                                      { return false }
func (noops) NothingToUndo() bool                                      { return false }

// kinds is the one map from a device kind to its implementation.
var kinds = map[configapi.DeviceKind]Kind{
	configapi.WholeGPU:   wholeGPU{},
	configapi.Monitor:    monitor{},
	configapi.MIG:        staticMIG{},
	configapi.DynamicMIG: dynamicMIG{},
	configapi.VFIO:       passthrough{},
}

// Of is the implementation of a kind.
func Of(k configapi.DeviceKind) Kind { return kinds[k] }

// KindOf is the kind of device a record is of, read from the record
// alone: a VM's GPU and MIG devices by what the record holds, a monitor
// device by its name (names keep their kind: deviceattr), else a whole
// GPU. It is the one answer to "which published device could be this
// record's hardware" (pkg/prepare liveDevice, pkg/driver's device
// metadata).
func KindOf(rec checkpoint.PreparedDevice) configapi.DeviceKind {
	switch {
	case rec.Vfio != nil:
		return configapi.VFIO
	case rec.Mig != nil && rec.Mig.Dynamic:
		return configapi.DynamicMIG
	case rec.Mig != nil:
		return configapi.MIG
	case deviceattr.IsMonitorDeviceName(rec.Device):
		return configapi.Monitor
	}
	return configapi.WholeGPU
}

// IsRecorded reports whether a published device is a record's own
// hardware: of the record's kind and matching it (same GPU, placement).
func IsRecorded(rec checkpoint.PreparedDevice, dev *Device) bool {
	return IsOfKind(rec, dev.Kind) && dev.Behavior().Matches(rec, dev) == nil
}

// IsOfKind reports whether a record is of kind k (KindOf).
func IsOfKind(rec checkpoint.PreparedDevice, k configapi.DeviceKind) bool { return KindOf(rec) == k }

// OfRecord is the implementation of a recorded device's kind, read from
// the record alone (the device may no longer be published). A whole GPU
// watched with admin access is done as a monitor device: nothing to undo
// either.
func OfRecord(rec checkpoint.PreparedDevice) Kind {
	k := KindOf(rec)
	if k == configapi.WholeGPU && rec.AdminAccess {
		k = configapi.Monitor
	}
	return kinds[k]
}

// watchGPU is the health watch of a device that is its whole GPU (a
// monitor device is its GPU seen again: it has the GPU's faults).
func watchGPU(pool string, dev *Device) health.Device {
	return health.Device{PoolName: pool, DeviceName: dev.Name, UUID: dev.GPU.UUID, NVML: dev.GPU.Device}
}

// sameGPU refuses a published device on another GPU than the record's.
func sameGPU(rec checkpoint.PreparedDevice, dev *Device) error {
	if gpu := ledger.Of(rec).GPU; gpu != "" && gpu != dev.GPU.UUID {
		return &MismatchError{Device: dev.Name, Now: dev.GPU.UUID, Recorded: gpu}
	}
	return nil
}

// MismatchError: a device name now means another GPU than the record's.
type MismatchError struct{ Device, Now, Recorded string }

func (e *MismatchError) Error() string {
	return "device " + e.Device + " is now GPU " + e.Now + ", not the claim's GPU " + e.Recorded + " (GPUs were renumbered)"
}
