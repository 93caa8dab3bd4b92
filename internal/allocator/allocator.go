// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package allocator is the one adapter over the kube-scheduler's structured
// allocator (k8s.io/dynamic-resource-allocation/structured and cel), whose
// Go API changes between Kubernetes minors. The tests' scheduler
// (internal/schedtest) and the operator's answers (pkg/clusterview:
// capacity, diagnose, the pending explainer) go through it, so the next
// change of that API touches this package only. It imports nothing of this
// module, so the admission webhook and the kubectl plugin link it without
// NVML.
//
// What differs by minor sits in one file per minor: k8s138.go for the
// allocator go.mod links (1.38: its own slice type draapi.ResourceSlice,
// consumed capacity keyed by draapi names, shares booked by device) and
// k8s137.go, built with the k8s137 tag against the module file
// hack/allocator/k8s137.sh derives from go.mod (1.37: API slices, shares
// booked by share ID), so that allocator-level tests run on both
// (make test-k8s137). This file is what the two have in common.
package allocator

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Allocator is the scheduler's allocator for one set of slices and state.
type Allocator = structured.Allocator

// ClassLister is what the allocator reads DeviceClasses through.
type ClassLister = structured.DeviceClassLister

// NewCELCache is the compiled-expression cache the scheduler gives the
// allocator, with the CEL features of Features.
func NewCELCache(size int) *cel.Cache {
	return cel.NewCache(size, cel.Features{EnableConsumableCapacity: true})
}

// State is what the scheduler books for allocated claims: devices taken
// whole, shares of shareable devices and the capacity they consume.
type State struct {
	s structured.AllocatedState
	// shares counts the shares held of each shared device (1.38 books a
	// shared device once however many shares it has: Release needs the
	// count to know when its last share is gone; Has reads it on both).
	shares map[structured.DeviceID]int
}

// NewState is a cluster where nothing is allocated yet.
func NewState() *State {
	return &State{s: structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[sharedKey](),
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
			s.s.AllocatedSharedDeviceIDs.Insert(shareOf(id, d.ShareID))
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
		s.shares[id]--
		last := s.shares[id] <= 0
		if last {
			delete(s.shares, id)
		}
		if last || !sharesByDevice {
			s.s.AllocatedSharedDeviceIDs.Delete(shareOf(id, d.ShareID))
		}
	}
}

// Taken reports whether a device is taken whole.
func (s *State) Taken(driver, pool, device string) bool {
	return s.s.AllocatedDevices.Has(structured.MakeDeviceID(driver, pool, device))
}

// Has reports whether a device is allocated, whole or as a share.
func (s *State) Has(driver, pool, device string) bool {
	id := structured.MakeDeviceID(driver, pool, device)
	return s.s.AllocatedDevices.Has(id) || s.shares[id] > 0
}

// Consumed is the capacity the shares of a device consume, by name.
func (s *State) Consumed(driver, pool, device string) map[string]resource.Quantity {
	used, ok := s.s.AggregatedCapacity[structured.MakeDeviceID(driver, pool, device)]
	if !ok {
		return nil
	}
	out := make(map[string]resource.Quantity, len(used))
	for n, q := range used {
		out[capacityName(n)] = *q // a value type: a plain copy is a deep one
	}
	return out
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
	for k := range s.s.AllocatedSharedDeviceIDs {
		if !drop(deviceOf(k).String()) {
			out.s.AllocatedSharedDeviceIDs.Insert(k)
		}
	}
	for id, n := range s.shares {
		if !drop(id.String()) {
			out.shares[id] = n
		}
	}
	for id, used := range s.s.AggregatedCapacity {
		if !drop(id.String()) {
			out.s.AggregatedCapacity[id] = used.Clone()
		}
	}
	return out
}
