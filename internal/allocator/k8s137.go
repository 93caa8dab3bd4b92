// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build k8s137

package allocator

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// The allocator of Kubernetes 1.37, built with the k8s137 tag against
// hack/allocator/k8s137.sh's module file (make test-k8s137), so that the
// allocator-level tests hold their figures on the previous minor's
// allocator too.

// linkedVersion is the k8s.io/* version this file is written for;
// hack/allocator/k8s137.sh pins the module file to it.
const linkedVersion = "v0.37.2"

// Features are the DRA features on by default in Kubernetes 1.37
// (kubernetes pkg/features/kube_features.go of v1.37.2): DRAAdminAccess,
// DRAConsumableCapacity, DRADeviceBindingConditions, DRADeviceTaints,
// DRAPartitionableDevices and DRAPrioritizedList.
var Features = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}

// Slices are ResourceSlices in the allocator's form: 1.37 takes the API's.
type Slices []*resourceapi.ResourceSlice

// ConvertSlices returns in: 1.37's allocator reads API slices.
func ConvertSlices(in []*resourceapi.ResourceSlice) (Slices, error) { return Slices(in), nil }

// New returns the allocator for slices with state's devices taken. The
// allocator may keep what it derived from state: after booking more into
// state, make a new one.
func New(ctx context.Context, classes ClassLister, state *State, slices Slices, celCache *cel.Cache) (Allocator, error) {
	return structured.NewAllocator(ctx, Features, state.s, classes, slices, celCache)
}

// sharedKey is what AllocatedSharedDeviceIDs holds: 1.37 books each share.
type sharedKey = structured.SharedDeviceID

// sharesByDevice: one key per share, dropped with that share.
const sharesByDevice = false

func shareOf(id structured.DeviceID, share *types.UID) sharedKey {
	return structured.MakeSharedDeviceID(id, share)
}

func deviceOf(k sharedKey) structured.DeviceID { return k.GetDeviceID() }

// capacityName is a consumed capacity's name as the API writes it.
func capacityName(n resourceapi.QualifiedName) string { return string(n) }

// Devices are the devices of a set of slices for evaluating selectors on
// them as the allocator does; 1.37's CEL reads API devices as they are,
// so there is nothing to convert or keep.
type Devices struct{}

// NewDevices indexes the devices of slices (nothing to do on 1.37).
func NewDevices([]*resourceapi.ResourceSlice) *Devices { return &Devices{} }

// Match evaluates a compiled selector on dev, a device of driver, exactly
// as the allocator does.
func (*Devices) Match(ctx context.Context, compiled cel.CompilationResult, driver string, dev *resourceapi.Device) (bool, error) {
	ok, _, err := compiled.DeviceMatches(ctx, cel.Device{
		Driver: driver, AllowMultipleAllocations: dev.AllowMultipleAllocations,
		Attributes: dev.Attributes, Capacity: dev.Capacity,
	})
	return ok, err
}
