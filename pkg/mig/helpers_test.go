// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package mig_test

import (
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func gpu0(t *testing.T, profile string) (*simulate.Simulator, *nvdev.GPU) {
	t.Helper()
	sim, inv, err := simulate.Discover(profile, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	return sim, inv.GPUs[0]
}

func mode(t *testing.T, g *nvdev.GPU) [2]int {
	t.Helper()
	cur, pend, ret := g.Device.GetMigMode()
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	return [2]int{cur, pend}
}

func placement(t *testing.T, g *nvdev.GPU, name string, start uint32) mig.Placement {
	t.Helper()
	for _, p := range g.MigProfiles {
		if p.Name == name {
			for _, pl := range p.Placements {
				if pl.Start == start {
					return mig.Placement{Profile: p, Start: start, Size: pl.Size}
				}
			}
		}
	}
	t.Fatalf("no %s at %d", name, start)
	return mig.Placement{}
}

var (
	on        = nvml.DEVICE_MIG_ENABLE
	off       = nvml.DEVICE_MIG_DISABLE
	enabled   = [2]int{on, on}
	disabled  = [2]int{off, off}
	migOnNode = "h100x1" + simulate.MigSuffix
)
