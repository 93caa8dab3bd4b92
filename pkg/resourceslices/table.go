// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Entry is one device the node offers: the API device the scheduler
// allocates, and what prepare needs to act on it. Both come from the same
// decision, so a published device is always preparable and the other way
// round.
type Entry struct {
	Device resourceapi.Device
	// Kind says what preparing the device involves; the device's type
	// attribute is Kind.Attribute().
	Kind configapi.DeviceKind
	// GPU is the GPU itself, or the parent of a MIG device.
	GPU *nvdev.GPU
	// Partitionable is set on whole GPUs that are also offered as dynamic
	// MIG devices: their MIG mode must be off while used whole.
	Partitionable bool
	// Profile, Start and Size locate a MIG device; StaticUUID, GIID and
	// CIID identify an existing (static) one.
	Profile     nvdev.MigProfile
	Start, Size uint32
	StaticUUID  string
	GIID, CIID  int
	// TimeSlicedShares is the consumable-shares mode ("integer",
	// "unlimited") of a GPU whose shares prepare time-slices rather than
	// run under MPS; empty otherwise (consumable.go).
	TimeSlicedShares string
}

// Table is every device a node offers, in publication order, and the
// counter sets its partitionable GPUs share.
type Table struct {
	Entries     []Entry
	CounterSets []resourceapi.CounterSet
}

// NewTable decides, once, how each GPU of inv is offered.
func NewTable(inv *nvdev.Inventory, o Options) Table {
	var t Table
	for _, g := range inv.GPUs {
		m := ModeOf(g, o)
		var migSet *resourceapi.CounterSet
		switch m {
		case Whole:
			t.Entries = append(t.Entries, Entry{Device: gpuDevice(inv, g), Kind: configapi.WholeGPU, GPU: g})
		case Shareable:
			t.Entries = append(t.Entries, shareableEntry(inv, g, o))
		case StaticMIG:
			for _, m := range g.MigDevices {
				t.Entries = append(t.Entries, Entry{
					Device: MigDevice(inv, g, m.Profile, m.Placement.Start, m.Placement.Size, m.UUID),
					Kind:   configapi.MIG, GPU: g, Profile: m.Profile, Start: m.Placement.Start, Size: m.Placement.Size,
					StaticUUID: m.UUID, GIID: m.GIID, CIID: m.CIID,
				})
			}
		case DynamicMIG:
			set, entries := partitionableDevices(inv, g, o.dynamicProfiles(g))
			t.CounterSets = append(t.CounterSets, set)
			t.Entries = append(t.Entries, entries...)
			migSet = &set
		}
		if passthroughOffered(g, m, o) {
			t.addPassthrough(inv, g, m, migSet, passthroughShares(g, o))
		}
	}
	t.Entries = profileMajor(t.Entries)
	t.Entries = append(t.Entries, heldLegacyEntries(t.Entries, o.HeldLegacyMigNames)...)
	for _, e := range monitorEntries(inv) {
		if !o.NoMonitorDevices || o.HeldMonitors[e.GPU.UUID] {
			t.Entries = append(t.Entries, e)
		}
	}
	return t
}

// heldLegacyEntries are the aliases (Aliases) whose names are held. They
// come last: the allocator walks devices in order, and a held device's
// current name, which comes first, is what a new claim gets once the
// placement is free again.
func heldLegacyEntries(entries []Entry, held map[string]string) []Entry {
	if len(held) == 0 {
		return nil
	}
	var out []Entry
	for _, e := range (Table{Entries: entries}).Aliases() {
		if parent, ok := held[e.Device.Name]; ok && parent == e.GPU.UUID {
			out = append(out, e)
		}
	}
	return out
}

// Aliases are the table's dynamic MIG devices under their older names
// (LegacyMigDeviceName), those not published under them: never offered,
// but a claim allocated before the rename (the kubelet retries its prepare
// after the plugin was upgraded, or it is restored and unprepared) names
// its device so, and is prepared as the device that name means now.
func (t Table) Aliases() []Entry {
	names := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		names[e.Device.Name] = true
	}
	var out []Entry
	for _, e := range t.Entries {
		legacy, ok := deviceattr.LegacyMigDeviceName(e.Device.Name)
		if e.Kind != configapi.DynamicMIG || !ok || names[legacy] {
			continue
		}
		c := e
		c.Device = *e.Device.DeepCopy()
		c.Device.Name = legacy
		out = append(out, c)
	}
	return out
}

// Resources returns the node's resources: one pool named after the node.
// Counter sets go into slices of their own (at most 8 per slice); devices
// are split into slices under the API's per-slice limits.
func (t Table) Resources(nodeName string) resourceslice.DriverResources {
	devices := make([]resourceapi.Device, len(t.Entries))
	for i, e := range t.Entries {
		devices[i] = e.Device
	}
	pool := resourceslice.Pool{}
	for _, sets := range chunk(t.CounterSets, MaxCounterSetsPerSlice) {
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: sets})
	}
	perSlice := MaxDevicesPerSlice
	if len(t.CounterSets) > 0 {
		perSlice = MaxDevicesPerSliceWithCounters
	}
	for _, c := range chunk(devices, perSlice) {
		pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: c})
	}
	if len(pool.Slices) == 0 {
		// An empty slice still tells the scheduler the pool exists and is empty.
		pool.Slices = []resourceslice.Slice{{}}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: pool}}
}

// Build returns the node's resources (NewTable, then Resources).
func Build(nodeName string, inv *nvdev.Inventory, o Options) resourceslice.DriverResources {
	return NewTable(inv, o).Resources(nodeName)
}

func chunk[T any](items []T, size int) [][]T {
	var out [][]T
	for len(items) > 0 {
		n := min(size, len(items))
		out = append(out, items[:n])
		items = items[n:]
	}
	return out
}
