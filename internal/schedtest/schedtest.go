// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package schedtest runs the kube-scheduler's structured allocator over the
// ResourceSlices this driver publishes and the DeviceClasses it ships, so
// tests prove what real users' claims would get.
package schedtest

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// T is the part of testing.TB the cluster uses, so that the offline demo
// can drive the same allocator.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Cluster is one node's slices plus the shipped classes, with the devices
// already allocated to earlier claims.
type Cluster struct {
	t    T
	Node *v1.Node
	// Slices are read only: the allocator runs on their conversion.
	Slices    []*resourceapi.ResourceSlice
	Classes   []*resourceapi.DeviceClass
	converted allocator.Slices
	allocated *allocator.State
	celCache  *cel.Cache
}

// New builds a cluster from driver resources as published by nodeName.
func New(t T, driverName, nodeName string, res resourceslice.DriverResources) *Cluster {
	t.Helper()
	var objs []*resourceapi.ResourceSlice
	for i, s := range resourceslices.Objects(driverName, nodeName, res) {
		s := s
		s.Name = fmt.Sprintf("%s%d", s.GenerateName, i)
		objs = append(objs, &s)
	}
	return NewFromSlices(t, nodeName, objs)
}

// NewFromSlices builds a cluster from ResourceSlice objects, for example
// those the plugin's controller wrote to an API server.
func NewFromSlices(t T, nodeName string, objs []*resourceapi.ResourceSlice) *Cluster {
	t.Helper()
	c := &Cluster{
		t:         t,
		Node:      &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/hostname": nodeName}}},
		Classes:   ShippedDeviceClasses(t),
		celCache:  NewCELCache(),
		allocated: allocator.NewState(),
	}
	c.Slices = objs
	converted, err := allocator.ConvertSlices(objs)
	if err != nil {
		t.Fatalf("%v", err)
	}
	c.converted = converted
	return c
}

// Converted are the cluster's slices as the allocator takes them.
func (c *Cluster) Converted() allocator.Slices { return c.converted }

// NewCELCache is the compiled-expression cache the scheduler gives the
// allocator, with the CEL features of allocator.Features.
func NewCELCache() *cel.Cache { return allocator.NewCELCache(100) }

// Hold records the devices of an allocation result in state, as the
// scheduler counts a claim's allocation for the claims after it.
func Hold(state *allocator.State, r *resourceapi.AllocationResult) { state.Hold(r, nil) }

// ShippedDeviceClasses returns the DeviceClasses the driver ships.
func ShippedDeviceClasses(t T) []*resourceapi.DeviceClass {
	t.Helper()
	out, err := static.DeviceClasses()
	if err != nil {
		t.Fatalf("DeviceClasses: %v", err)
	}
	return out
}

// List implements allocator.ClassLister.
func (c *Cluster) List() ([]*resourceapi.DeviceClass, error) { return c.Classes, nil }

// Get implements allocator.ClassLister.
func (c *Cluster) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, dc := range c.Classes {
		if dc.Name == name {
			return dc, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// Allocate runs the allocator for one claim. It returns nil when the claim
// cannot be satisfied; otherwise the devices are recorded as allocated so
// that later claims compete with it, as in a real cluster.
func (c *Cluster) Allocate(claim *resourceapi.ResourceClaim) *resourceapi.AllocationResult {
	c.t.Helper()
	alloc, err := allocator.New(context.Background(), c, c.allocated, c.converted, c.celCache)
	if err != nil {
		c.t.Fatalf("new allocator: %v", err)
	}
	results, err := alloc.Allocate(context.Background(), c.Node, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		c.t.Fatalf("allocate %s: %v", claim.Name, err)
	}
	if len(results) == 0 {
		return nil
	}
	r := results[0]
	Hold(c.allocated, &r)
	return &r
}

// Claim builds a claim with the given requests, defaulted as the apiserver would.
func Claim(name string, requests ...resourceapi.DeviceRequest) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
}

// Request asks for count devices of a class matching every CEL selector.
func Request(name, class string, count int64, selectors ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
	}}
	for _, s := range selectors {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: s}})
	}
	return r
}

// WithCapacity adds capacity requests (e.g. memory: 20Gi) to a request.
func WithCapacity(r resourceapi.DeviceRequest, requests map[resourceapi.QualifiedName]string) resourceapi.DeviceRequest {
	r.Exactly.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
	for name, q := range requests {
		r.Exactly.Capacity.Requests[name] = resource.MustParse(q)
	}
	return r
}

// Devices lists the allocated device names.
func Devices(r *resourceapi.AllocationResult) []string {
	if r == nil {
		return nil
	}
	var out []string
	for _, d := range r.Devices.Results {
		out = append(out, d.Device)
	}
	return out
}
