// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Issue 47, defect 2: a chart value or feature gate turned off under
// running claims (featureGates.DynamicMIG=false, passthrough.gpus emptied,
// memory fractions off) leaves their hardware held and published as held,
// and their unprepare undoes what their record says from the record alone:
// nothing a record made is left as if an admin had made it.

// publishedDevice is device want as the running plugin publishes it (its
// device table: the API may still hold the slices of the plugin before),
// and the names of every device it publishes.
func publishedDevice(t *testing.T, n *node, want string) (resourceapi.Device, []string) {
	t.Helper()
	names := tableNames(n)
	e, ok := n.driver.meta.published[want]
	if !ok {
		t.Errorf("%s is not published: %v", want, names)
	}
	return e.Device, names
}

func tableNames(n *node) []string {
	names := make([]string, 0, len(n.driver.meta.published))
	for name := range n.driver.meta.published {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func TestDynamicMIGTurnedOffUnderAClaim(t *testing.T) {
	const profile = "h100x2"
	n := newMigNode(t, profile)
	const held = "gpu-0-mig-1g10gb-19-0"
	c := n.claim("mig", []string{held})
	ids := n.mustPrepare(c)

	n.dynamicMIG = false
	n.restart(profile)
	// The claim's MIG device is the driver's, not an admin's static one:
	// it stays published as the dynamic device the claim holds, consuming
	// its GPU's counters, and is never offered again as a free static MIG
	// device (gpu-0-mig-1g10gb-0) nor is its GPU offered whole and free.
	dev, names := publishedDevice(t, n, held)
	if len(dev.ConsumesCounters) == 0 {
		t.Errorf("held device %s is published without counters: the scheduler does not count what it occupies", held)
	}
	if e, ok := n.driver.meta.published["gpu-0-mig-1g10gb-0"]; ok && e.Kind == configapi.MIG {
		t.Errorf("the claim's own MIG device is offered as a static MIG device: %v", names)
	}
	if whole, _ := publishedDevice(t, n, "gpu-0"); len(whole.ConsumesCounters) == 0 {
		t.Error("GPU 0 is offered whole, without the counters its held MIG device consumes")
	}
	if !slices.Contains(names, "gpu-1") || slices.Contains(names, "gpu-1-mig-1g10gb-19-0") {
		t.Errorf("GPU 1, which no claim holds, is not published as the gate says (whole, no MIG device): %v", names)
	}
	if again := n.mustPrepare(c); !slices.Equal(again, ids) {
		t.Fatalf("prepare after the gate was turned off answered %v, before %v", again, ids)
	}

	n.unprepare(c)
	sim := n.driverSim()
	g := n.driver.cfg.Backend.Inventory.GPUs[0]
	if got := sim.MigInstanceCount(g.UUID); got != 0 {
		t.Errorf("unprepare left %d MIG devices on GPU 0", got)
	}
	if mode, _, ret := g.Device.GetMigMode(); ret != nvml.SUCCESS || mode != nvml.DEVICE_MIG_DISABLE {
		t.Errorf("GPU 0 left in MIG mode %d (%v) after its last dynamic MIG device was unprepared", mode, ret)
	}
	// Nothing held: the node publishes GPU 0 as the gate says.
	n.restart(profile)
	names = tableNames(n)
	if slices.Contains(names, held) || slices.Contains(names, "gpu-0-mig-1g10gb-0") || !slices.Contains(names, "gpu-0") {
		t.Errorf("with the gate off and nothing held, GPU 0 publishes MIG devices: %v", names)
	}
}

func TestPassthroughTurnedOffUnderAVM(t *testing.T) {
	const profile = "h100x2"
	n := newNode(t, profile)
	n.passthrough = resourceslices.PassthroughSelector{All: true}
	n.restart(profile)
	vm := n.claim("vm", []string{"gpu-1-vfio"})
	ids := n.mustPrepare(vm)

	n.passthrough = resourceslices.PassthroughSelector{}
	n.restart(profile)
	dev, names := publishedDevice(t, n, "gpu-1-vfio")
	if len(dev.ConsumesCounters) == 0 {
		t.Errorf("the VM's device is published without counters: %+v", dev)
	}
	if whole, _ := publishedDevice(t, n, "gpu-1"); len(whole.ConsumesCounters) == 0 {
		t.Errorf("GPU 1, a VM's, is offered whole without the counters its VM consumes: %v", names)
	}
	if slices.Contains(names, "gpu-0-vfio") {
		t.Errorf("passthrough is off, and GPU 0, which no VM holds, is offered for one: %v", names)
	}
	if again := n.mustPrepare(vm); !slices.Equal(again, ids) {
		t.Fatalf("prepare after passthrough was turned off answered %v, before %v", again, ids)
	}
	n.unprepare(vm)
	if d := n.driverSim().BoundDriver(simulate.PCIBusID(1)); d != vfio.DriverNvidia {
		t.Fatalf("GPU 1 on %q after unprepare, want nvidia", d)
	}
}

func TestMemoryFractionsTurnedOffUnderShares(t *testing.T) {
	const profile = "h100x1"
	n := newSharingNode(t, profile)
	gpu := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	a := n.sharedClaim("frac-a", "gpu-0", "20Gi", "")
	ids := n.mustPrepare(a)

	n.fractional = false
	n.restart(profile)
	dev, _ := publishedDevice(t, n, "gpu-0")
	if dev.AllowMultipleAllocations == nil || !*dev.AllowMultipleAllocations {
		t.Errorf("gpu-0, which a share holds, is published as a device one claim takes whole: %+v", dev)
	}
	if again := n.mustPrepare(a); !slices.Equal(again, ids) {
		t.Fatalf("prepare after memory fractions were turned off answered %v, before %v", again, ids)
	}
	m, d := n.mps(gpu)
	if _, ok := m.PID(d); !ok {
		t.Fatal("the share's MPS daemon is not running after the restart")
	}
	n.unprepare(a)
	if _, ok := m.PID(d); ok {
		t.Fatal("the share's MPS daemon runs after its unprepare")
	}
}
