// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"testing"

	"k8s.io/utils/ptr"
)

const adminFixture = "testdata/pending-admin-access-counters.yaml"

// setRequest changes the fixture's monitoring claim's request.
func setRequest(t *testing.T, f *fixture, class string, admin bool) {
	t.Helper()
	claim := f.Snapshot.Claim("monitoring", "all-gpus")
	if claim == nil {
		t.Fatal("fixture lacks claim monitoring/all-gpus")
	}
	req := claim.Spec.Devices.Requests[0].Exactly
	req.DeviceClassName = class
	req.AdminAccess = ptr.To(admin)
}

// The scheduler's own allocator agrees with the verdicts: it finds no node
// for the admin-access claim of the GPU class on the busy dynamic-MIG
// node (kubernetes/kubernetes#140729), and fits the monitor class there.
func TestAdminAccessAllocatorAgrees(t *testing.T) {
	for _, tc := range []struct {
		class, node string
	}{{"gpu.nvidia.com", ""}, {"monitor.gpu.nvidia.com", "vm"}} {
		f := loadFixture(t, adminFixture)
		setRequest(t, f, tc.class, true)
		claim := f.Snapshot.Claim("monitoring", "all-gpus")
		c := published(&f.Snapshot, string(claim.UID))
		node, err := c.allocate(claim, c.candidateNodes(nil))
		if err != nil || node != tc.node {
			t.Errorf("class %s: allocator gives node %q (%v), want %q", tc.class, node, err, tc.node)
		}
	}
}
