// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !k8s137

package allocator

import (
	"context"
	"fmt"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// The allocator of Kubernetes 1.38, the one go.mod links.

// linkedVersion is go.mod's version of module, for binaries built without
// module information (TestLinkedVersion holds it to go.mod).
const linkedVersion = "v0.38.0-beta.0"

// Features are the DRA features on by default in the Kubernetes minor this
// module links (Minor; kubernetes pkg/features/kube_features.go of
// v1.38.0-beta.0): DRAAdminAccess, DRAConsumableCapacity,
// DRADeviceBindingConditions, DRADeviceTaints, DRAFractionalCapacityRange,
// DRAPartitionableDevices and DRAPrioritizedList; the alpha ones
// (compatibility groups, derived and list-type attributes, optional node
// operations) stay off, as on a production cluster.
var Features = structured.Features{
	AdminAccess:             true,
	ConsumableCapacity:      true,
	DeviceBindingAndStatus:  true,
	DeviceTaints:            true,
	FractionalCapacityRange: true,
	PartitionableDevices:    true,
	PrioritizedList:         true,
}

// Slices are ResourceSlices in the allocator's own form, converted once
// (the conversion interns every name; repeated allocations reuse it).
type Slices []*draapi.ResourceSlice

// ConvertSlices converts API slices into the allocator's form.
func ConvertSlices(in []*resourceapi.ResourceSlice) (Slices, error) {
	out := make(Slices, 0, len(in))
	for _, s := range in {
		c, err := convert(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func convert(s *resourceapi.ResourceSlice) (*draapi.ResourceSlice, error) {
	var c draapi.ResourceSlice
	if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(s, &c, nil); err != nil {
		return nil, fmt.Errorf("ResourceSlice %s: %w", s.Name, err)
	}
	return &c, nil
}

// New returns the allocator for slices with state's devices taken. The
// allocator may keep what it derived from state: after booking more into
// state, make a new one.
func New(ctx context.Context, classes ClassLister, state *State, slices Slices, celCache *cel.Cache) (Allocator, error) {
	return structured.NewAllocator(ctx, Features, state.s, classes, slices, celCache)
}

// sharedKey is what AllocatedSharedDeviceIDs holds: 1.38 books a shared
// device once, whatever its shares.
type sharedKey = structured.DeviceID

// sharesByDevice: one key for all shares of a device, dropped with the last.
const sharesByDevice = true

func shareOf(id structured.DeviceID, _ *types.UID) sharedKey { return id }

func deviceOf(k sharedKey) structured.DeviceID { return k }

// capacityName is a consumed capacity's name as the API writes it.
func capacityName(n draapi.FullyQualifiedName) string { return n.String() }

// Devices are the devices of a set of slices for evaluating selectors on
// them as the allocator does: 1.38's CEL reads the allocator's form of a
// device, so each slice is converted once, on the first selector
// evaluated on one of its devices, instead of at every evaluation. The
// devices are known by address: the slices must stay unchanged while
// Devices are used. Match is safe for concurrent use.
type Devices struct {
	byDev map[*resourceapi.Device]deviceRef
}

type deviceRef struct {
	slice *lazySlice
	index int
}

type lazySlice struct {
	once sync.Once
	in   *resourceapi.ResourceSlice
	out  *draapi.ResourceSlice
	err  error
}

// NewDevices indexes the devices of slices; it converts nothing yet.
func NewDevices(slices []*resourceapi.ResourceSlice) *Devices {
	n := 0
	for _, s := range slices {
		n += len(s.Spec.Devices)
	}
	ds := &Devices{byDev: make(map[*resourceapi.Device]deviceRef, n)}
	for _, s := range slices {
		ls := &lazySlice{in: s}
		for j := range s.Spec.Devices {
			ds.byDev[&s.Spec.Devices[j]] = deviceRef{ls, j}
		}
	}
	return ds
}

// Match evaluates a compiled selector on dev, a device of driver, exactly
// as the allocator does. A device that is not one of ds's (or a nil ds) is
// converted alone, for this call.
func (ds *Devices) Match(ctx context.Context, compiled cel.CompilationResult, driver string, dev *resourceapi.Device) (bool, error) {
	var s *draapi.ResourceSlice
	var d *draapi.Device
	if ref, ok := ds.lookup(dev); ok {
		ls := ref.slice
		ls.once.Do(func() { ls.out, ls.err = convert(ls.in) })
		if ls.err != nil {
			return false, ls.err
		}
		s, d = ls.out, &ls.out.Spec.Devices[ref.index]
	} else {
		in := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, Devices: []resourceapi.Device{*dev}}}
		c, err := convert(in)
		if err != nil {
			return false, err
		}
		s, d = c, &c.Spec.Devices[0]
	}
	ok, _, err := compiled.DeviceMatches(ctx, cel.Device{
		Driver: driver, AllowMultipleAllocations: dev.AllowMultipleAllocations,
		LookupUniqueString: s.LookupUniqueString, Attributes: d.Attributes, Capacity: d.Capacity,
	})
	return ok, err
}

func (ds *Devices) lookup(dev *resourceapi.Device) (deviceRef, bool) {
	if ds == nil {
		return deviceRef{}, false
	}
	ref, ok := ds.byDev[dev]
	return ref, ok
}
