// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview_test

import (
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// The scheduler's own allocator agrees with the verdicts: it finds no node
// for the admin-access claim of the GPU class on the busy dynamic-MIG
// node (kubernetes/kubernetes#140729), and fits the monitor class there.
func TestAdminAccessAllocatorAgrees(t *testing.T) {
	for _, tc := range []struct {
		class, node string
	}{{"gpu.nvidia.com", ""}, {"monitor.gpu.nvidia.com", "vm"}} {
		f := loadFixture(t, clusterviewtest.AdminAccessCounters)
		f.SetAdminRequest(t, tc.class, true)
		claim := f.Snapshot.Claim("monitoring", "all-gpus")
		node, err := clusterview.AllocateForTest(&f.Snapshot, claim)
		if err != nil || node != tc.node {
			t.Errorf("class %s: allocator gives node %q (%v), want %q", tc.class, node, err, tc.node)
		}
	}
}
