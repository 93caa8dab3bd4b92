// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func TestDiscoverSimulatedNode(t *testing.T) {
	p, _ := simulate.ParseProfile("a100-80gbx4")
	sim, err := simulate.New(p, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	if inv.DriverVersion != "570.133.20" || inv.CudaDriverVersion != "12.8.0" || len(inv.GPUs) != 4 {
		t.Fatalf("inventory header %+v with %d GPUs", inv, len(inv.GPUs))
	}
	g := inv.GPUs[3]
	if g.ProductName != "NVIDIA A100-SXM4-80GB" || g.Architecture != "Ampere" || g.CudaComputeCapability != "8.0.0" {
		t.Errorf("GPU 3 identity: %+v", g)
	}
	if g.MemoryBytes != 80<<30 || g.Multiprocessors != 108 || !g.MigCapable || g.MigEnabled {
		t.Errorf("GPU 3 resources: mem %d sms %d mig %v/%v", g.MemoryBytes, g.Multiprocessors, g.MigCapable, g.MigEnabled)
	}
	// NVML's upper-case 8-digit domain is normalised and sysfs resolves the root.
	if g.PCIBusID != simulate.PCIBusID(3) || g.PCIeRoot != simulate.PCIeRoot(3) || g.NUMANode == nil || *g.NUMANode != 0 {
		t.Errorf("GPU 3 topology: bus %s root %s numa %v", g.PCIBusID, g.PCIeRoot, g.NUMANode)
	}
	if inv.GPUs[2].PCIeRoot != g.PCIeRoot || inv.GPUs[1].PCIeRoot == g.PCIeRoot {
		t.Errorf("GPUs 2 and 3 should share a root, 1 and 3 not")
	}
}

func TestVersionAndBusIDNormalisation(t *testing.T) {
	for in, want := range map[string]string{"535.104.05": "535.104.5", "560.28": "560.28.0", "570.133.20": "570.133.20"} {
		if got := nvdev.SemverFromDotted(in); got != want {
			t.Errorf("SemverFromDotted(%q) = %q, want %q", in, got, want)
		}
	}
	if got := nvdev.NormalizePCIBusID("00000000:3B:00.0"); got != "0000:3b:00.0" {
		t.Errorf("NormalizePCIBusID = %q", got)
	}
}

func TestMissingLibraryNamesPaths(t *testing.T) {
	_, err := nvdev.FindLibrary("/nonexistent-root", "")
	if err == nil || !strings.Contains(err.Error(), "lstat /nonexistent-root: no such file") || !strings.Contains(err.Error(), "--driver-root") {
		t.Fatalf("error %v must name the root that is missing and the flag to fix", err)
	}
}
