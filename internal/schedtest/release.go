// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package schedtest

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Deallocate gives back what Allocate recorded for a result, as the
// scheduler does once a claim's pods are gone and the claim is
// deallocated, so that later claims may take its devices again.
func (c *Cluster) Deallocate(r *resourceapi.AllocationResult) {
	if r == nil {
		return
	}
	for _, d := range r.Devices.Results {
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.ShareID != nil {
			c.allocated.AllocatedSharedDeviceIDs.Delete(structured.MakeSharedDeviceID(id, d.ShareID))
			c.allocated.AggregatedCapacity.Remove(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
		} else {
			c.allocated.AllocatedDevices.Delete(id)
		}
	}
}
