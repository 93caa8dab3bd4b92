// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// MemoryStep is the granularity of memory shares.
var MemoryStep = resource.MustParse("1Gi")

// ShareableGPUDevice publishes a GPU that many claims can share by memory
// fraction: allowMultipleAllocations, and request policies on memory (1Gi
// steps; a claim that asks for nothing gets the whole memory, so an unsized
// claim never shares by accident) and on computePercentage (1-point steps;
// default 0: no compute limit).
func ShareableGPUDevice(inv *nvdev.Inventory, g *nvdev.GPU) resourceapi.Device {
	d := gpuDevice(inv, g)
	d.AllowMultipleAllocations = ptr.To(true)
	// On a shared device every capacity without a request policy is taken
	// whole by each share; the SM count moves to an attribute, and compute
	// is shared through computePercentage.
	if sms, ok := d.Capacity[deviceattr.CapMultiprocessors]; ok {
		delete(d.Capacity, deviceattr.CapMultiprocessors)
		d.Attributes[deviceattr.CapMultiprocessors] = resourceapi.DeviceAttribute{IntValue: ptr.To(sms.Value.Value())}
	}
	total := resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)
	mem := d.Capacity[deviceattr.CapMemory]
	mem.RequestPolicy = &resourceapi.CapacityRequestPolicy{
		Default:    total,
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(MemoryStep), Max: total, Step: ptr.To(MemoryStep)},
	}
	d.Capacity[deviceattr.CapMemory] = mem
	d.Capacity[deviceattr.CapComputePercentage] = resourceapi.DeviceCapacity{
		Value: *resource.NewQuantity(100, resource.DecimalSI),
		RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default:    resource.NewQuantity(0, resource.DecimalSI),
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(0, resource.DecimalSI), Max: resource.NewQuantity(100, resource.DecimalSI), Step: resource.NewQuantity(1, resource.DecimalSI)},
		},
	}
	return d
}
