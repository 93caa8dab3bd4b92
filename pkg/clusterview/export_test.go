// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import resourceapi "k8s.io/api/resource/v1"

// What the tests in clusterview_test reach inside the package for: they
// are outside it to load fixtures with internal/clusterviewtest, which
// imports this package.

// AllocateForTest asks the scheduler's allocator for a node for claim,
// with the devices its own allocation holds counted free.
func AllocateForTest(s *Snapshot, claim *resourceapi.ResourceClaim) (string, error) {
	c := published(s, string(claim.UID))
	return c.allocate(claim, c.candidateNodes(nil, nil))
}

// SetMemoizeForTest turns the memoization of Capacity on or off.
func SetMemoizeForTest(on bool) { memoize = on }
