// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// editRecord rewrites a claim's checkpoint record while the plugin is
// stopped, as an older or damaged node state would have it.
func (n *node) editRecord(uid string, edit func(*checkpoint.PreparedClaim)) {
	n.t.Helper()
	store, _, err := checkpoint.Open(checkpoint.Dir(n.in.StateDir()))
	if err != nil {
		n.t.Fatal(err)
	}
	for _, rec := range store.List() {
		if string(rec.UID) == uid {
			edit(&rec)
			if err := store.Put(rec); err != nil {
				n.t.Fatal(err)
			}
			return
		}
	}
	n.t.Fatalf("no record of %s", uid)
}

// Defect 4: a VM's GPU is published from its record while it sits on
// vfio-pci. A record whose minor a live GPU now has (nvidia.ko reloaded
// while the GPU was away), or whose product name no attribute can carry,
// must not stop the node from publishing its other GPUs; the VM claim can
// still be unprepared and its GPU comes back.
func TestPassthroughRecordThatCannotBePublished(t *testing.T) {
	for name, edit := range map[string]func(*checkpoint.VfioRecord){
		"minor of a live GPU": func(v *checkpoint.VfioRecord) { v.GPU.Minor = 0 },
		"over-long name":      func(v *checkpoint.VfioRecord) { v.GPU.ProductName = strings.Repeat("NVIDIA H100 ", 20) },
	} {
		t.Run(name, func(t *testing.T) {
			n := newMigNode(t, "h100x2")
			n.passthrough = resourceslices.PassthroughSelector{All: true}
			n.restart("h100x2")
			vm := n.claim("vm", []string{"gpu-1-vfio"})
			n.mustPrepare(vm)
			n.stop()
			n.editRecord(string(vm.UID), func(rec *checkpoint.PreparedClaim) { edit(rec.Devices[0].Vfio) })
			n.start("h100x2") // fails the test if start fails
			if names := publishedNames(n, "gpu-0"); !slices.Contains(names, "gpu-0") {
				t.Fatalf("the live GPU 0 is not published: %v", names)
			}
			if res := n.unprepare(vm)[string(vm.UID)]; res.GetError() != "" {
				t.Fatal(res.GetError())
			}
			if d := n.driverSim().BoundDriver(simulate.PCIBusID(1)); d != vfio.DriverNvidia {
				t.Fatalf("GPU 1 on %q after unprepare", d)
			}
		})
	}
}

// Defect 5: a GPU that --passthrough-gpus names and that is lost (off the
// bus) is not a typo: the node's healthy GPUs are published.
func TestPassthroughNamedGPULost(t *testing.T) {
	n := newMigNode(t, "h100x2")
	n.passthrough = resourceslices.PassthroughSelector{Names: []string{simulate.PCIBusID(1)}}
	n.restart("h100x2")
	sim := n.driverSim()
	if err := sim.SetLost(n.driver.cfg.Backend.Inventory.GPUs[1].UUID, true); err != nil {
		t.Fatal(err)
	}
	n.restart("h100x2")
	if names := publishedNames(n, "gpu-0"); !slices.Contains(names, "gpu-0") {
		t.Fatalf("the healthy GPU 0 is not published: %v", names)
	}
}

// Defect 7: the allocation metrics of a GPU a VM holds survive a restart,
// although NVML no longer lists that GPU.
func TestPassthroughAllocationMetricsAfterRestart(t *testing.T) {
	n := newMigNode(t, "h100x2")
	n.passthrough = resourceslices.PassthroughSelector{All: true}
	n.restart("h100x2")
	n.mustPrepare(n.claim("vm", []string{"gpu-1-vfio"}))
	wantSeries(t, "prepared", n.scrape(), "1", map[string]float64{metricname.GPUState + " state=" + metricname.StatePassthrough: 1})
	n.restart("h100x2")
	wantSeries(t, "after restart", n.scrape(), "1", map[string]float64{metricname.GPUState + " state=" + metricname.StatePassthrough: 1})
}
