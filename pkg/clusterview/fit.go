// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"context"
	"sort"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Whether one device can be had now is asked of the scheduler's own
// allocator, not worked out here: the allocator gets the device's pool
// with only that device offered (and the allocated devices, whose shared
// counters and consumed capacity it books), and a one-device request with
// the request's capacity and admin access. What it answers is what the
// scheduler would, counters, shared capacity and the allocator's
// treatment of admin access (kubernetes/kubernetes#140729) included.
// Device taints are left out of the question (every taint tolerated):
// they are told apart from the device's data, so a tainted device that
// would otherwise fit says so.

// anyClass is a DeviceClass without selectors, for the probe's request:
// the device already passed the real class's selectors.
const anyClass = "gpudra-diagnose-any-device"

type probeClasses struct{ classLister }

func (l probeClasses) Get(name string) (*resourceapi.DeviceClass, error) {
	if name == anyClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: anyClass}}, nil
	}
	return l.classLister.Get(name)
}

// fits asks the allocator whether d could be allocated now to a request
// like req, with the devices in without (device keys) taken as free.
func (c *cluster) fits(d *device, req *resourceapi.ExactDeviceRequest, without ...string) bool {
	state := c.allocated
	if len(without) > 0 {
		drop := map[string]bool{} // DeviceID.String() is driver/pool/device, a device key
		for _, k := range without {
			drop[k] = true
		}
		state = c.allocated.Without(func(key string) bool { return drop[key] })
	}
	only := func(driver string, x *resourceapi.Device) bool { return driver == d.Driver && x.Name == d.Dev.Name }
	slices := candidates(c.poolSlices[d.Driver+"/"+d.Pool], state, only)
	probe := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpudra-diagnose-device-probe", Namespace: "default", UID: "gpudra-diagnose-device-probe"}}
	probe.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "probe", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: anyClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Capacity: req.Capacity, AdminAccess: req.AdminAccess,
		Tolerations: []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists}},
	}}}
	if ptr.Deref(req.AdminAccess, false) {
		// The allocator lets admin access ask only for devices of a
		// namespace that may have it; the probe's may.
		probe.Namespace = "kube-system"
	}
	ctx := context.Background()
	converted, err := allocator.ConvertSlices(slices)
	if err != nil {
		return false
	}
	alloc, err := allocator.New(ctx, probeClasses{classLister{c.snap}}, state, converted, celCache)
	if err != nil {
		return false
	}
	node := c.snap.Node(d.Node)
	if node == nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Node, Labels: map[string]string{corev1.LabelHostname: d.Node}}}
	}
	res, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{probe})
	return err == nil && len(res) > 0
}

// smallestShare is a request for the least of each of a shareable
// device's capacities that its request policy allows: a shared GPU is
// free while it has room for that.
func smallestShare(d *device) *resourceapi.ExactDeviceRequest {
	req := &resourceapi.ExactDeviceRequest{Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}}
	for name, capa := range d.Dev.Capacity {
		p := capa.RequestPolicy
		switch {
		case p == nil:
			// Without a policy a share takes what it asks for; the
			// allocator's default then is all of it.
		case p.ValidRange != nil && p.ValidRange.Min != nil:
			req.Capacity.Requests[name] = *p.ValidRange.Min
		case len(p.ValidValues) > 0:
			req.Capacity.Requests[name] = p.ValidValues[0]
		}
	}
	return req
}

// blockersOf names the allocated devices that keep d from being allocated
// to req, as the allocator answers it: each allocated device of d's pool
// drawing on a counter set d draws on whose release alone lets d fit; where
// no single release does (d overlaps several), all of those that draw on
// one of the same counters. set is the counter set they share with d.
func (c *cluster) blockersOf(d *device, req *resourceapi.ExactDeviceRequest) (blockers []string, set string) {
	type share struct{ set, counter string }
	mine := map[share]bool{}
	sets := map[string]bool{}
	for _, cc := range d.Dev.ConsumesCounters {
		sets[cc.CounterSet] = true
		for name := range cc.Counters {
			mine[share{cc.CounterSet, name}] = true
		}
	}
	var drawing, overlapping []string
	setOf := map[string]string{}
	for _, o := range c.devices {
		if o.Driver != d.Driver || o.Pool != d.Pool || !c.allocated.Has(o.Driver, o.Pool, o.Dev.Name) {
			continue
		}
		for _, cc := range o.Dev.ConsumesCounters {
			if !sets[cc.CounterSet] {
				continue
			}
			if setOf[o.key()] == "" {
				drawing = append(drawing, o.key())
				setOf[o.key()] = cc.CounterSet
			}
			for name := range cc.Counters {
				if mine[share{cc.CounterSet, name}] && !contains(overlapping, o.key()) {
					overlapping = append(overlapping, o.key())
					setOf[o.key()] = cc.CounterSet
				}
			}
		}
	}
	for _, k := range drawing {
		if c.fits(d, req, k) {
			blockers = append(blockers, k)
		}
	}
	if len(blockers) == 0 {
		blockers = overlapping
	}
	sort.Strings(blockers)
	if len(blockers) > 0 {
		set = setOf[blockers[0]]
	}
	return blockers, set
}
