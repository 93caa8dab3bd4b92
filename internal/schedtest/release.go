// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package schedtest

import resourceapi "k8s.io/api/resource/v1"

// Deallocate gives back what Allocate recorded for a result, as the
// scheduler does once a claim's pods are gone and the claim is
// deallocated, so that later claims may take its devices again.
func (c *Cluster) Deallocate(r *resourceapi.AllocationResult) {
	if r != nil {
		c.allocated.Release(r)
	}
}
