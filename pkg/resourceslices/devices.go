// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package resourceslices turns an nvdev.Inventory into the ResourceSlices a node
// publishes, with the attribute names and device naming scheme of
// pkg/deviceattr that users' CEL selectors depend on, and checks the result
// against the API's limits before anything is sent.
package resourceslices

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// gpuDevice builds the API device for one whole GPU.
func gpuDevice(inv *nvdev.Inventory, g *nvdev.GPU) resourceapi.Device {
	attrs := commonAttributes(inv, g)
	attrs[deviceattr.AttrType] = str(configapi.WholeGPU.Attribute())
	attrs[deviceattr.AttrUUID] = str(g.UUID)
	attrs[deviceattr.AttrIndex] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.Index))}
	attrs[deviceattr.AttrMinor] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(g.Minor))}
	attrs[deviceattr.AttrMigCapable] = resourceapi.DeviceAttribute{BoolValue: ptr.To(g.MigCapable)}

	capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		deviceattr.CapMemory: {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
	}
	if g.Multiprocessors > 0 {
		capacity[deviceattr.CapMultiprocessors] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(g.Multiprocessors), resource.DecimalSI)}
	}
	return resourceapi.Device{
		Name:       deviceattr.GPUDeviceName(g.Minor),
		Attributes: attrs,
		Capacity:   capacity,
	}
}

// commonAttributes are the attributes a GPU shares with its MIG devices:
// model, architecture, driver, memory addressing, the GPU's PCI address
// and topology. They are the attributes NVIDIA's reference driver
// publishes on both (cmd/gpu-kubelet-plugin deviceinfo.go and mig.go,
// 95932046: CommonAttributesMig gives a MIG device its parent's), under the
// same names and with the same values, so that a selector written against
// its slices matches here (docs/claims.md).
func commonAttributes(inv *nvdev.Inventory, g *nvdev.GPU) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		deviceattr.AttrProductName:           str(g.ProductName),
		deviceattr.AttrBrand:                 str(g.Brand),
		deviceattr.AttrArchitecture:          str(g.Architecture),
		deviceattr.AttrCudaComputeCapability: version(g.CudaComputeCapability),
		deviceattr.AttrDriverVersion:         version(inv.DriverVersion),
		deviceattr.AttrCudaDriverVersion:     version(inv.CudaDriverVersion),
	}
	if g.AddressingMode != "" {
		attrs[deviceattr.AttrAddressingMode] = str(g.AddressingMode)
	}
	if g.PCIBusID != "" {
		attrs[deviceattribute.StandardDeviceAttributePCIBusID] = str(g.PCIBusID)
	}
	topologyAttributes(attrs, g)
	return attrs
}

// topologyAttributes are the standard attributes that align a device with
// others (matchAttribute on resource.kubernetes.io/pcieRoot, a NIC's NUMA
// node).
func topologyAttributes(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, g *nvdev.GPU) {
	if g.PCIeRoot != "" {
		attrs[deviceattribute.StandardDeviceAttributePCIeRoot] = str(g.PCIeRoot)
	}
	if g.NUMANode != nil {
		attrs[deviceattribute.StandardDeviceAttributeNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(*g.NUMANode))}
	}
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func version(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{VersionValue: &s}
}

// Options shape what a node publishes.
type Options struct {
	// DynamicMIG publishes MIG-capable GPUs as partitionable devices whose
	// MIG devices are created at prepare time.
	DynamicMIG bool
	// FractionalMemory publishes whole GPUs as shareable: many claims may
	// each take a share of memory (and optionally compute), enforced by MPS.
	FractionalMemory bool
	// FractionalGPUs limits FractionalMemory to these minors (all if empty).
	FractionalGPUs []int
	// ConsumableShares offers GPUs for shares as NVIDIA's driver's
	// --consumable-shares does (consumable.go); not on a GPU
	// FractionalMemory offers too (ConsumableShares.Overlaps).
	ConsumableShares ConsumableShares
	// DynamicParents are GPUs whose existing MIG devices this driver
	// created (per its checkpoint): they stay dynamic rather than being
	// mistaken for an admin's static MIG layout, with DynamicMIG turned off
	// too (offering then only the profiles the checkpoint holds devices
	// of), until their claims are unprepared.
	DynamicParents map[string]bool
	// HeldPassthrough are GPUs (by UUID) that the checkpoint holds for a
	// VM: their vfio device stays published, consuming the GPU's
	// counters, with Passthrough no longer selecting them.
	HeldPassthrough map[string]bool
	// HeldShares are GPUs (by UUID) of which the checkpoint holds shares:
	// they stay Shareable with FractionalMemory and ConsumableShares
	// turned off.
	HeldShares map[string]bool
	// NoMonitorDevices leaves out the GPUs' monitor devices (monitor.go):
	// a node then publishes half the devices where GPUs are whole, which
	// the scheduler's per-device CEL work scales with, but admin-access
	// requests on dynamic MIG nodes stay Pending while a GPU is in use.
	NoMonitorDevices bool
	// HeldMonitors are GPUs (by UUID) whose monitor device the checkpoint
	// holds: it stays published even with NoMonitorDevices, so that its
	// claim keeps its device and can be unprepared.
	HeldMonitors map[string]bool
	// MigProfiles, when not empty, limits dynamic MIG to these profiles
	// (names as NVIDIA spells them, e.g. "1g.10gb", "1g.10gb+me"): the
	// scheduler's work per node grows with the devices it publishes, and a
	// fleet rarely uses all 25 placements of an H100. Static MIG devices
	// are published whatever it says: they exist. profiles.go.
	MigProfiles []string
	// HeldMigProfiles are, per parent GPU UUID, the profiles of the dynamic
	// MIG devices the checkpoint holds. They stay published even when
	// MigProfiles no longer lists them, so that a claim prepared before
	// the list changed can still be unprepared (and restored after a
	// reboot), and the scheduler keeps counting what it occupies.
	HeldMigProfiles map[string][]string
	// HeldLegacyMigNames are the dynamic MIG devices the checkpoint holds
	// under the names of the releases before the names carried the
	// profile ID (MigName.LegacyName), each with its parent GPU's UUID.
	// Each is published under that name too, beside its current name and
	// consuming the same counters: the scheduler counts what an allocated
	// device consumes only while the device is published, and would
	// otherwise hand its placement (or its whole GPU) to another claim,
	// which prepare then refuses. A name whose minor is another GPU's now
	// (minors renumbered) is not published.
	HeldLegacyMigNames map[string]string
	// Passthrough selects the GPUs that are also published as vfio
	// devices for virtual machines (passthrough.go).
	Passthrough PassthroughSelector
}

// Mode is how one GPU is published.
type Mode int

const (
	// Whole: the GPU is one device.
	Whole Mode = iota
	// StaticMIG: MIG devices an admin created are published; the GPU is not.
	StaticMIG
	// DynamicMIG: the GPU and every MIG placement are published, sharing
	// counters so the scheduler never hands out overlapping pieces.
	DynamicMIG
	// Shareable: the GPU is one device that many claims can each take a
	// share of (memory fractions, consumable shares). It is not partitioned.
	Shareable
)

func (o Options) shares(g *nvdev.GPU) bool {
	if o.HeldShares[g.UUID] || o.ConsumableShares.selects(g) {
		return true
	}
	if !o.FractionalMemory {
		return false
	}
	return len(o.FractionalGPUs) == 0 || slices.Contains(o.FractionalGPUs, g.Minor)
}

// ModeOf decides how a GPU is published. A GPU none of whose profiles
// MigProfiles lists is published as it would be without dynamic MIG (Whole,
// Shareable, or StaticMIG when its MIG mode is on): a partitionable GPU
// with no MIG device to offer would only cost counters, and prepare would
// then manage its MIG mode for nothing.
func ModeOf(g *nvdev.GPU, o Options) Mode {
	dynamic := o.DynamicMIG && g.MigCapable && len(o.dynamicProfiles(g)) > 0
	switch {
	case o.DynamicParents[g.UUID] && len(o.dynamicProfiles(g)) > 0:
		return DynamicMIG
	case g.MigEnabled && len(g.MigDevices) > 0:
		return StaticMIG
	case g.MigEnabled && !dynamic:
		// MIG mode is on but nothing may be created: the admin's (empty)
		// layout is all there is. Used whole, the GPU would show CUDA no
		// device at all.
		return StaticMIG
	case o.shares(g):
		return Shareable
	case dynamic && (g.MigEnabled || !g.MigModeChangeNeedsReset):
		return DynamicMIG
	default:
		return Whole
	}
}
