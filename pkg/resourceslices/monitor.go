// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Monitor devices (type deviceattr.TypeMonitor, named
// deviceattr.MonitorDeviceName).
//
// Every physical GPU is also published as a monitor device: the GPU for
// admin-access requests (monitoring agents such as DCGM), which consumes no
// shared counters. The allocator (Kubernetes 1.37's and 1.38's) checks and
// reserves a partitionable device's counters even for admin-access requests
// (kubernetes/kubernetes#140729), so an admin-access request for the whole
// GPU device of a GPU that runs a MIG device or a whole-GPU workload never
// fits; the monitor device always does. The chart's DeviceClasses
// gpu.nvidia.com and mig.nvidia.com select `type == 'gpu'` and `'mig'` and
// never pick it; its own class (monitor.<driver domain>) selects
// `type == 'monitor'`. Admission (webhook and admission policy) and prepare
// refuse it to requests without adminAccess: true.
// monitorDevice builds the monitor device of one GPU: the GPU's attributes
// (uuid, index, minor, model, driver, topology) and capacities, type
// "monitor", no counters and no sharing. Taints follow the GPU: the health
// monitor watches it as a whole-GPU device of the same GPU.
func monitorDevice(inv *nvdev.Inventory, g *nvdev.GPU) resourceapi.Device {
	d := gpuDevice(inv, g)
	d.Name = deviceattr.MonitorDeviceName(g.Minor)
	d.Attributes[deviceattr.AttrType] = str(configapi.Monitor.Attribute())
	return d
}

// monitorEntries are the monitor devices of every GPU of inv, in GPU order.
// They come after every other device, so a request that could match both
// (a class of the admin's own without a type selector) looks at the
// workload devices first.
func monitorEntries(inv *nvdev.Inventory) []Entry {
	out := make([]Entry, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		out = append(out, Entry{Device: monitorDevice(inv, g), Kind: configapi.Monitor, GPU: g})
	}
	return out
}
