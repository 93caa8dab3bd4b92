// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// taintGPU republishes node's pools as the plugin does for a GPU that NVML
// reports lost: every device of the GPU of this index (the GPU and its MIG
// devices, which share its UUID) gets the NoSchedule unhealthy taint
// (resourceslices.WithTaints, which also cuts the pool's device slices to
// the API's limit for tainted slices), at the next pool generation. The
// new slices are created before the old ones go, as the scheduler then
// never sees the pool without devices.
func taintGPU(ctx context.Context, cs kubernetes.Interface, node string, index int) (int, error) {
	list, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	objs, n, err := taintedSlices(list.Items, node, index, time.Now())
	if err != nil {
		return 0, err
	}
	for i := range objs {
		if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, &objs[i], metav1.CreateOptions{}); err != nil {
			return 0, err
		}
	}
	for _, s := range list.Items {
		if err := cs.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// taintedSlices is taintGPU without the API: the new slices of the pools
// of old, and how many devices got the taint.
func taintedSlices(old []resourceapi.ResourceSlice, node string, index int, now time.Time) ([]resourceapi.ResourceSlice, int, error) {
	sort.Slice(old, func(i, j int) bool { return old[i].Name < old[j].Name }) // the controller's order
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	gen := map[string]int64{}
	uuid := ""
	for _, s := range old {
		p := res.Pools[s.Spec.Pool.Name]
		p.Slices = append(p.Slices, resourceslice.Slice{Devices: s.Spec.Devices, SharedCounters: s.Spec.SharedCounters,
			PerDeviceNodeSelection: s.Spec.PerDeviceNodeSelection, PartitionTypeAttribute: s.Spec.PartitionTypeAttribute, SkipNodeOperations: s.Spec.SkipNodeOperations})
		res.Pools[s.Spec.Pool.Name] = p
		gen[s.Spec.Pool.Name] = max(gen[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		for _, d := range s.Spec.Devices {
			if i := d.Attributes["index"].IntValue; i != nil && *i == int64(index) && d.Attributes["uuid"].StringValue != nil {
				uuid = *d.Attributes["uuid"].StringValue
			}
		}
	}
	if uuid == "" {
		return nil, 0, fmt.Errorf("node %s has no GPU with index %d", node, index)
	}
	taint := []resourceapi.DeviceTaint{{Key: resourceslices.TaintUnhealthy, Value: "gpu-lost", Effect: resourceapi.DeviceTaintEffectNoSchedule,
		TimeAdded: &metav1.Time{Time: time.Unix(now.Unix(), 0)}}}
	taints := map[string][]resourceapi.DeviceTaint{}
	for _, s := range old {
		for _, d := range s.Spec.Devices {
			for _, a := range []resourceapi.QualifiedName{"uuid", "parentUUID"} {
				if v := d.Attributes[a].StringValue; v != nil && *v == uuid {
					taints[d.Name] = taint
				}
			}
		}
	}
	res = resourceslices.WithTaints(res, taints)
	if err := resourceslices.Validate(res); err != nil {
		return nil, 0, err
	}
	objs := resourceslices.Objects(old[0].Spec.Driver, node, res)
	for i := range objs {
		objs[i].Spec.Pool.Generation = gen[objs[i].Spec.Pool.Name] + 1
	}
	return objs, len(taints), nil
}
