// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// counterComputeSlices is the counter of a dynamic MIG GPU's compute
// slices (its memory slices: deviceattr.MemorySliceCounter).
const counterComputeSlices = "compute-slices"

// counterSetName is the counter set of one GPU's partitionable resources.
func counterSetName(minor int) string { return fmt.Sprintf("gpu-%d-counters", minor) }

// instanceCounter is named after the profile ID NVML reports (e.g.
// "profile-20-instances" for 1g.10gb+me), as `nvidia-smi mig -lgip` shows it.
func instanceCounter(p nvdev.MigProfile) string {
	return fmt.Sprintf("profile-%d-instances", p.GIProfileID)
}

// fullProfile is the profile spanning the whole GPU; its engine counts are
// the GPU's totals.
func fullProfile(g *nvdev.GPU) nvdev.MigProfile {
	full := g.MigProfiles[0]
	for _, p := range g.MigProfiles {
		if p.Info.SliceCount > full.Info.SliceCount || (p.Info.SliceCount == full.Info.SliceCount && p.Info.MemorySizeMB > full.Info.MemorySizeMB) {
			full = p
		}
	}
	return full
}

// migCounterSet describes what a GPU can be carved into: one counter per
// memory slice (so overlapping placements exclude each other), compute
// slices and memory (guards, published only where the memory slices do not
// already imply them: implied.go), and an instance cap for profiles the
// hardware limits to fewer instances than it has placements (of the
// published profiles only: a cap no device consumes is scheduler work for
// nothing). The memory slices, compute slices and memory are the whole
// GPU's even when only some profiles are published, so the whole GPU,
// which consumes every counter, still excludes every MIG device. Engines
// (decoders, JPEG, OFA) are not counters: the hardware binds them to
// slices, so per-profile engine counts do not add up to the GPU's total
// (seven 1g.10gb devices each have a decoder on an A100-80GB with five);
// the slice counters already keep instances apart, and engines stay
// capacities users can select on.
func migCounterSet(g *nvdev.GPU, profiles []nvdev.MigProfile) resourceapi.CounterSet {
	full := fullProfile(g).Info
	c := map[string]resourceapi.Counter{}
	for i := 0; i < nvdev.MemorySlices(g.MigProfiles); i++ {
		c[deviceattr.MemorySliceCounter(i)] = counter(1)
	}
	c[counterComputeSlices] = counter(int64(full.SliceCount))
	c[deviceattr.CapMemory] = resourceapi.Counter{Value: *resource.NewQuantity(int64(full.MemorySizeMB)<<20, resource.BinarySI)}
	for _, p := range profiles {
		if int(p.Info.InstanceCount) < len(p.Placements) {
			c[instanceCounter(p)] = counter(int64(p.Info.InstanceCount))
		}
	}
	return resourceapi.CounterSet{Name: counterSetName(g.Minor), Counters: c}
}

func counter(v int64) resourceapi.Counter {
	return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
}

// placementConsumption is what one MIG placement takes from its GPU.
func placementConsumption(g *nvdev.GPU, p nvdev.MigProfile, start, size uint32) resourceapi.DeviceCounterConsumption {
	c := map[string]resourceapi.Counter{
		counterComputeSlices: counter(int64(p.Info.SliceCount)),
		deviceattr.CapMemory: {Value: *resource.NewQuantity(int64(p.Info.MemorySizeMB)<<20, resource.BinarySI)},
	}
	for i := start; i < start+size; i++ {
		c[deviceattr.MemorySliceCounter(int(i))] = counter(1)
	}
	if int(p.Info.InstanceCount) < len(p.Placements) {
		c[instanceCounter(p)] = counter(1)
	}
	return resourceapi.DeviceCounterConsumption{CounterSet: counterSetName(g.Minor), Counters: c}
}

// MigDevice builds the API device of a MIG device, dynamic (not created
// yet, no uuid) or static (existing, with uuid): its type, profile and
// parent, the parent's attributes that NVIDIA's reference driver gives its
// MIG devices too (commonAttributes: model, brand, architecture, compute
// capability, driver versions, addressing mode, PCI address, topology), and
// the capacities it gives them: memory, multiprocessors and engines
// (CommonCapacitiesMig in its mig.go, 95932046). Its placement goes into
// the device metadata file of a prepared device instead (MigDetails).
//
// An earlier release left brand, the driver versions, the PCI address and
// the engines off MIG devices: the 1.37 allocator converted every
// attribute and capacity of a device for each CEL evaluation on every
// Filter call, and a dynamic-MIG node publishes 26 devices per GPU. A
// selector written for NVIDIA's MIG devices (driverVersion, say) then
// failed here. internal/allocator converts a node's slices once:
// BenchmarkFilterPerNode allocates the same per Filter call with the
// attributes as without them, the engine capacities add 10 allocations
// (of about 400) to a MIG claim's call, and converting an 8 x H100
// dynamic-MIG node's slices, once per slice change, takes 4,800 -> 7,900
// allocations. A device stays within the API's 32 attributes and
// capacities (TestPublishedDevicesWithinAttributeLimit).
func MigDevice(inv *nvdev.Inventory, g *nvdev.GPU, p nvdev.MigProfile, start, size uint32, uuid string) resourceapi.Device {
	attrs := commonAttributes(inv, g)
	attrs[deviceattr.AttrType] = str(configapi.MIG.Attribute())
	attrs[deviceattr.AttrProfile] = str(p.Name)
	attrs[deviceattr.AttrParentUUID] = str(g.UUID)
	if uuid != "" {
		attrs[deviceattr.AttrUUID] = str(uuid)
	}
	capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		deviceattr.CapMemory: {Value: *resource.NewQuantity(int64(p.Info.MemorySizeMB)<<20, resource.BinarySI)},
	}
	for name, n := range map[resourceapi.QualifiedName]uint32{
		deviceattr.CapMultiprocessors: p.Info.MultiprocessorCount,
		deviceattr.CapCopyEngines:     p.Info.CopyEngineCount,
		deviceattr.CapDecoders:        p.Info.DecoderCount,
		deviceattr.CapEncoders:        p.Info.EncoderCount,
		deviceattr.CapJpegEngines:     p.Info.JpegCount,
		deviceattr.CapOfaEngines:      p.Info.OfaCount,
	} {
		capacity[name] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(int64(n), resource.DecimalSI)}
	}
	name := deviceattr.MigDeviceName(g.Minor, p.Name, start)
	if uuid == "" {
		name = DynamicMigDeviceName(g.Minor, p, start)
	}
	return resourceapi.Device{Name: name, Attributes: attrs, Capacity: capacity}
}

// MigDetails describe a MIG entry beyond what it publishes: its
// placement, its parent's minor and its engines. The device metadata file
// of a prepared MIG device carries them, under these names, beside what
// the device publishes; they are made when a device is prepared, not kept
// for every published one.
func MigDetails(_ *nvdev.Inventory, e Entry) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	if !e.Kind.IsMIG() {
		return nil // a GPU used whole, passed through or watched has none
	}
	g, p, start, size := e.GPU, e.Profile, e.Start, e.Size
	n := func(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: ptr.To(v)} }
	return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		deviceattr.AttrParentMinor:    n(int64(g.Minor)),
		deviceattr.AttrPlacementStart: n(int64(start)),
		deviceattr.AttrPlacementSize:  n(int64(size)),
		deviceattr.CapCopyEngines:     n(int64(p.Info.CopyEngineCount)),
		deviceattr.CapDecoders:        n(int64(p.Info.DecoderCount)),
		deviceattr.CapEncoders:        n(int64(p.Info.EncoderCount)),
		deviceattr.CapJpegEngines:     n(int64(p.Info.JpegCount)),
		deviceattr.CapOfaEngines:      n(int64(p.Info.OfaCount)),
	}
}

// WholeGPUPublished reports whether a GPU published in mode m is also a
// device of its own. Under dynamic MIG it is, consuming every counter, only
// where the plugin can turn MIG mode off for it: a GPU whose MIG mode
// changes only with a reset (Ampere) is offered for dynamic MIG only when
// an admin has turned MIG mode on, and in MIG mode it cannot run a
// whole-GPU workload.
func WholeGPUPublished(g *nvdev.GPU, m Mode) bool {
	switch m {
	case StaticMIG:
		return false
	case DynamicMIG:
		return !g.MigModeChangeNeedsReset
	}
	return true
}

// partitionableDevices returns, for a GPU with dynamic MIG, its counter set,
// the whole-GPU device consuming every counter (where WholeGPUPublished),
// and one device per valid placement of each of profiles (Options.
// dynamicProfiles: all of the GPU's, or those published), in the order
// that packs pod-by-pod allocation well (packing.go). Packing order and
// the implied guards are worked out over the published placements only:
// no layout can use the others.
func partitionableDevices(inv *nvdev.Inventory, g *nvdev.GPU, profiles []nvdev.MigProfile) (resourceapi.CounterSet, []Entry) {
	set := migCounterSet(g, profiles)
	var entries []Entry
	if WholeGPUPublished(g, DynamicMIG) {
		whole := gpuDevice(inv, g)
		all := map[string]resourceapi.Counter{}
		for name, c := range set.Counters {
			all[name] = c
		}
		whole.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set.Name, Counters: all}}
		entries = append(entries, Entry{Device: whole, Kind: configapi.WholeGPU, GPU: g, Partitionable: true})
	}
	var placements []migPlacement
	for _, p := range profiles {
		for _, pl := range p.Placements {
			d := MigDevice(inv, g, p, pl.Start, pl.Size, "")
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{placementConsumption(g, p, pl.Start, pl.Size)}
			e := Entry{Device: d, Kind: configapi.DynamicMIG, GPU: g, Profile: p, Start: pl.Start, Size: pl.Size}
			placements = append(placements, migPlacement{entry: e, profile: p})
		}
	}
	entries = append(entries, packingOrder(set, placements)...)
	pruneImpliedCounters(&set, entries, placements)
	return set, entries
}
