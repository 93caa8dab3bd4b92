// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package allocator is the one adapter over the kube-scheduler's structured
// allocator (k8s.io/dynamic-resource-allocation/structured and cel), whose
// Go API changes between Kubernetes minors: 1.38 takes its own slice type
// (draapi.ResourceSlice), keys consumed capacity by draapi names and books
// shares by device. The tests' scheduler (internal/schedtest) and the
// operator's answers (pkg/clusterview: capacity, diagnose, the pending
// explainer) go through it, so the next change of that API touches this
// package only. It imports nothing of this module, so the admission webhook
// and the kubectl plugin link it without NVML.
package allocator

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

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

// Allocator is the scheduler's allocator for one set of slices and state.
type Allocator = structured.Allocator

// ClassLister is what the allocator reads DeviceClasses through.
type ClassLister = structured.DeviceClassLister

// NewCELCache is the compiled-expression cache the scheduler gives the
// allocator, with the CEL features of Features.
func NewCELCache(size int) *cel.Cache {
	return cel.NewCache(size, cel.Features{EnableConsumableCapacity: true})
}

// Slices are ResourceSlices in the allocator's own form, converted once
// (the conversion interns every name; repeated allocations reuse it).
type Slices []*draapi.ResourceSlice

// ConvertSlices converts API slices into the allocator's form.
func ConvertSlices(in []*resourceapi.ResourceSlice) (Slices, error) {
	out := make(Slices, 0, len(in))
	for _, s := range in {
		var c draapi.ResourceSlice
		if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(s, &c, nil); err != nil {
			return nil, fmt.Errorf("ResourceSlice %s: %w", s.Name, err)
		}
		out = append(out, &c)
	}
	return out, nil
}

// New returns the allocator for slices with state's devices taken. The
// allocator may keep what it derived from state: after booking more into
// state, make a new one.
func New(ctx context.Context, classes ClassLister, state *State, slices Slices, celCache *cel.Cache) (Allocator, error) {
	return structured.NewAllocator(ctx, Features, state.s, classes, slices, celCache)
}

// State is what the scheduler books for allocated claims: devices taken
// whole, shares of shareable devices and the capacity they consume.
type State struct {
	s structured.AllocatedState
	// shares counts the shares held of each shared device: 1.38 books a
	// shared device once however many shares it has, so Release needs
	// the count to know when its last share is gone.
	shares map[structured.DeviceID]int
}

// NewState is a cluster where nothing is allocated yet.
func NewState() *State {
	return &State{s: structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.DeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}, shares: map[structured.DeviceID]int{}}
}

// Hold books an allocation's devices, those of pools keep admits (all when
// keep is nil): a share of a shareable device by the capacity it consumed,
// any other device as taken.
func (s *State) Hold(a *resourceapi.AllocationResult, keep func(driver, pool string) bool) {
	for _, d := range a.Devices.Results {
		if keep != nil && !keep(d.Driver, d.Pool) {
			continue
		}
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.ShareID != nil {
			s.s.AllocatedSharedDeviceIDs.Insert(id)
			s.shares[id]++
			s.s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
		} else {
			s.s.AllocatedDevices.Insert(id)
		}
	}
}

// Release gives back what Hold booked for a, as the scheduler does once a
// claim is deallocated.
func (s *State) Release(a *resourceapi.AllocationResult) {
	for _, d := range a.Devices.Results {
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.ShareID == nil {
			s.s.AllocatedDevices.Delete(id)
			continue
		}
		s.s.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
		if s.shares[id]--; s.shares[id] <= 0 {
			delete(s.shares, id)
			s.s.AllocatedSharedDeviceIDs.Delete(id)
		}
	}
}

// Taken reports whether a device is taken whole.
func (s *State) Taken(driver, pool, device string) bool {
	return s.s.AllocatedDevices.Has(structured.MakeDeviceID(driver, pool, device))
}

// Consumed is the capacity the shares of a device consume, by name.
func (s *State) Consumed(driver, pool, device string) map[string]resource.Quantity {
	used, ok := s.s.AggregatedCapacity[structured.MakeDeviceID(driver, pool, device)]
	if !ok {
		return nil
	}
	out := make(map[string]resource.Quantity, len(used))
	for n, q := range used {
		out[n.String()] = *q // a value type: a plain copy is a deep one
	}
	return out
}

// MatchDevice evaluates a compiled selector on one device of driver exactly
// as the allocator does (the device converted as the allocator's slices
// are).
func MatchDevice(ctx context.Context, compiled cel.CompilationResult, driver string, dev *resourceapi.Device) (bool, error) {
	var s draapi.ResourceSlice
	in := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: driver, Devices: []resourceapi.Device{*dev}}}
	if err := draapi.Convert_v1_ResourceSlice_To_api_ResourceSlice(in, &s, nil); err != nil {
		return false, err
	}
	d := &s.Spec.Devices[0]
	ok, _, err := compiled.DeviceMatches(ctx, cel.Device{
		Driver: driver, AllowMultipleAllocations: dev.AllowMultipleAllocations,
		LookupUniqueString: s.LookupUniqueString, Attributes: d.Attributes, Capacity: d.Capacity,
	})
	return ok, err
}

// Has reports whether a device is allocated, whole or as a share.
func (s *State) Has(driver, pool, device string) bool {
	id := structured.MakeDeviceID(driver, pool, device)
	return s.s.AllocatedDevices.Has(id) || s.s.AllocatedSharedDeviceIDs.Has(id)
}

// Without is a copy of the state with the devices drop names (by
// driver/pool/device) released, whole and every share of them.
func (s *State) Without(drop func(key string) bool) *State {
	out := NewState()
	for id := range s.s.AllocatedDevices {
		if !drop(id.String()) {
			out.s.AllocatedDevices.Insert(id)
		}
	}
	for id := range s.s.AllocatedSharedDeviceIDs {
		if !drop(id.String()) {
			out.s.AllocatedSharedDeviceIDs.Insert(id)
			out.shares[id] = s.shares[id]
		}
	}
	for id, used := range s.s.AggregatedCapacity {
		if !drop(id.String()) {
			out.s.AggregatedCapacity[id] = used.Clone()
		}
	}
	return out
}
