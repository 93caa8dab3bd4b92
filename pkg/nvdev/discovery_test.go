// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestDiscoveryKeepsHealthyGPUs (defect 4): a GPU NVML cannot describe is
// left out; the node's other GPUs are published.
func TestDiscoveryKeepsHealthyGPUs(t *testing.T) {
	sim := brokenNode(t)
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatalf("one broken GPU failed the node: %v", err)
	}
	if len(inv.GPUs) != 2 || inv.GPUs[0].Index != 0 || inv.GPUs[1].Index != 2 {
		t.Fatalf("discovered %d GPUs", len(inv.GPUs))
	}
}

// brokenNode has four H100s; GPU 1 is lost and GPU 3 answers UNKNOWN.
func brokenNode(t *testing.T) *simulate.Simulator {
	t.Helper()
	p, _ := simulate.ParseProfile("h100x4")
	sim, err := simulate.New(p, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	lost, _ := sim.Devices[1].GetUUID()
	broken, _ := sim.Devices[3].GetUUID()
	if err := sim.SetLost(lost, true); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetFault(broken, nvml.ERROR_UNKNOWN); err != nil {
		t.Fatal(err)
	}
	return sim
}

// TestDiscoveryCountsFailedGPUs (defect 4): the GPUs left out are listed
// with their error and counted in gpu_dra_discovery_failed_gpus_total.
func TestDiscoveryCountsFailedGPUs(t *testing.T) {
	sim := brokenNode(t)
	lost, _ := sim.Devices[1].GetUUID()
	broken, _ := sim.Devices[3].GetUUID()
	m := metrics.New()
	before := counter(t, m, "gpu_dra_discovery_failed_gpus_total")
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Failed) != 2 || inv.Failed[0].UUID != lost || !strings.Contains(inv.Failed[0].Err.Error(), "GPU_IS_LOST") || inv.Failed[1].UUID != broken {
		t.Fatalf("failed GPUs %+v", inv.Failed)
	}
	if after := counter(t, m, "gpu_dra_discovery_failed_gpus_total"); after-before != 2 {
		t.Fatalf("metric went from %v to %v", before, after)
	}
}

func counter(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
