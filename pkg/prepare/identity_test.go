// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Identity by UUID (issue 38): a recorded PCI address is a hint checked
// against the live GPU, never acted on alone; and a record holds the
// hardware it names whether or not the node still publishes its device.

// moveRecordedAddress rewrites a VM claim's record as if its GPU had sat
// at addr when it was prepared: what a reboot that renumbered the buses
// (a card added or moved) leaves behind.
func (n *node) moveRecordedAddress(uid types.UID, addr string) {
	n.t.Helper()
	rec, ok := n.store.Get(uid)
	if !ok {
		n.t.Fatalf("no record of %s", uid)
	}
	for i := range rec.Devices {
		if v := rec.Devices[i].Vfio; v != nil {
			v.PCIBusID = addr
			if v.GPU != nil {
				g := *v.GPU
				g.PCIBusID = addr
				v.GPU = &g
			}
		}
	}
	if err := n.store.Put(rec); err != nil {
		n.t.Fatal(err)
	}
}

// Defect 1: after a reboot in which the VM's GPU moved, start must bind the
// VM's GPU (found by UUID), not whatever GPU now sits at the recorded
// address, which a pod holds whole; and unprepare must bind back the VM's
// GPU, not the pod's.
func TestPassthroughRestoreFollowsUUIDNotAddress(t *testing.T) {
	n := passthroughNode(t, nil)
	vm := claim("vm", dev(vfioName(0)))
	pod := claim("pod", dev(gpuName(1)))
	n.prepare(vm)
	n.prepare(pod)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	// GPU 1 (the pod's) now sits where the record says the VM's GPU was.
	n.moveRecordedAddress("vm", simulate.PCIBusID(1))
	n.restart()
	n.state.RecoverLocal(context.Background())
	if got := n.bound(1); got != vfio.DriverNvidia {
		t.Fatalf("the pod's GPU 1 is on %q after start: a VM got a GPU a pod holds", got)
	}
	if got := n.bound(0); got != vfio.DriverVFIO {
		t.Fatalf("the VM's GPU 0 is on %q after start, want vfio-pci", got)
	}
	rec, _ := n.store.Get("vm")
	if a := rec.Devices[0].Vfio.PCIBusID; a != simulate.PCIBusID(0) {
		t.Fatalf("record names %s after restore, want the live address %s", a, simulate.PCIBusID(0))
	}
	n.unprepare(vm)
	if n.bound(0) != vfio.DriverNvidia || n.bound(1) != vfio.DriverNvidia || n.nvmlCount() != 2 {
		t.Fatalf("after unprepare: GPU 0 on %q, GPU 1 on %q, NVML sees %d", n.bound(0), n.bound(1), n.nvmlCount())
	}
}

// Defect 1, unprepare side: a record whose address is of an earlier boot
// and whose GPU NVML sees on nvidia has nothing to bind back; the GPU at
// the recorded address (another claim's) is left alone.
func TestPassthroughUnprepareLeavesRecordedAddressAlone(t *testing.T) {
	n := passthroughNode(t, nil)
	vm := claim("vm", dev(vfioName(0)))
	n.prepare(vm)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	n.moveRecordedAddress("vm", simulate.PCIBusID(1))
	// GPU 1 goes to a VM of its own, outside this claim.
	n.passthrough.Host.Timeout = 2e9
	if err := n.passthrough.Host.Bind(simulate.PCIBusID(1), vfio.DriverVFIO); err != nil {
		t.Fatal(err)
	}
	n.restart()
	// Unprepared before any restore (the kubelet's call can come first
	// when start could not restore it).
	if err := n.state.Unprepare(context.Background(), ref(vm)); err != nil {
		t.Fatal(err)
	}
	if got := n.bound(1); got != vfio.DriverVFIO {
		t.Fatalf("unprepare of the VM claim rebound GPU 1 (not its GPU) to %q", got)
	}
	n.assertGone("vm")
}

// Defect 2: a VM claim whose vfio device is no longer published (passthrough
// turned off for its GPU) still holds its GPU: no pod gets it, and when
// passthrough comes back start binds the VM's GPU, which no pod has.
func TestUnpublishedVFIOClaimKeepsItsGPU(t *testing.T) {
	n := passthroughNode(t, nil)
	vm := claim("vm", dev(vfioName(0)))
	n.prepare(vm)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	vfioDev := n.devices[vfioName(0)]
	delete(n.devices, vfioName(0)) // --passthrough-gpus no longer names GPU 0
	n.restart()
	n.state.RecoverLocal(context.Background())
	if _, err := n.tryPrepare(claim("pod", dev(gpuName(0)))); err == nil || !strings.Contains(err.Error(), "vm") {
		t.Fatalf("a pod got GPU 0 while an unrestored VM claim holds it: %v", err)
	}
	n.devices[vfioName(0)] = vfioDev
	n.restart()
	n.state.RecoverLocal(context.Background())
	if got := n.bound(0); got != vfio.DriverVFIO {
		t.Fatalf("GPU 0 on %q once passthrough is back", got)
	}
	if _, ok := n.store.Get("pod"); ok {
		t.Fatal("the pod's claim has a record")
	}
}

// Defect 3: whole-GPU claims need MIG mode off, a VM's too: the guest would
// get a GPU it cannot use whole.
func TestPassthroughTurnsMigModeOff(t *testing.T) {
	n := passthroughNode(t, nil)
	for _, g := range n.inv.GPUs {
		if len(g.MigProfiles) == 0 {
			t.Skip("profile without MIG")
		}
	}
	n.devices[vfioName(0)].Partitionable = true
	if err := n.sim.SetMigModeAsAdmin(n.uuid(0), nvml.DEVICE_MIG_ENABLE); err != nil {
		t.Fatal(err)
	}
	if n.migMode(0) != nvml.DEVICE_MIG_ENABLE {
		t.Fatal("MIG mode did not turn on")
	}
	vm := claim("vm", dev(vfioName(0)))
	_, err := n.tryPrepare(vm)
	if err != nil && n.bound(0) != vfio.DriverNvidia {
		t.Fatalf("refused, but GPU 0 is on %q", n.bound(0))
	}
	if err == nil {
		// NVML cannot see a GPU on vfio-pci: look once it is back (binding
		// changes no MIG mode).
		n.unprepare(vm)
		if n.migMode(0) != nvml.DEVICE_MIG_DISABLE {
			t.Fatal("a VM got GPU 0 with MIG mode on")
		}
	}
	// A MIG device of someone else's on it: never passed through.
	n2 := passthroughNode(t, nil)
	n2.devices[vfioName(0)].Partitionable = true
	if err := n2.sim.SetMigModeAsAdmin(n2.uuid(0), nvml.DEVICE_MIG_ENABLE); err != nil {
		t.Fatal(err)
	}
	g := n2.inv.GPUs[0]
	prof := g.MigProfiles[0]
	if _, err := mig.Create(g.Device, mig.Placement{Profile: prof, Start: prof.Placements[0].Start, Size: prof.Placements[0].Size}); err != nil {
		t.Fatal(err)
	}
	if _, err := n2.tryPrepare(claim("vm", dev(vfioName(0)))); err == nil || !strings.Contains(err.Error(), "MIG") {
		t.Fatalf("passthrough of a GPU with a MIG device on it: %v", err)
	}
	if n2.bound(0) != vfio.DriverNvidia {
		t.Fatalf("GPU 0 on %q after a refused passthrough", n2.bound(0))
	}
	n2.assertGone("vm")
}

// Defect 6: a VM claim whose GPU has gone from sysfs (hot-unplugged, fell
// off the bus for good) can be unprepared: there is nothing left to bind.
func TestPassthroughUnprepareOfVanishedGPU(t *testing.T) {
	n := passthroughNode(t, nil)
	vm := claim("vm", dev(vfioName(1)))
	n.prepare(vm)
	if err := os.Remove(filepath.Join(n.sim.SysfsRoot(), "bus/pci/devices", simulate.PCIBusID(1))); err != nil {
		t.Fatal(err)
	}
	n.unprepare(vm)
	n.assertGone("vm")
	// And after a restart, from the record alone.
	n.prepare(claim("vm2", dev(vfioName(0))))
	if err := os.Remove(filepath.Join(n.sim.SysfsRoot(), "bus/pci/devices", simulate.PCIBusID(0))); err != nil {
		t.Fatal(err)
	}
	n.restart()
	n.state.RecoverLocal(context.Background())
	n.unprepare(claim("vm2", dev(vfioName(0))))
	n.assertGone("vm2")
}

// GPUs are named by minor. After a reboot (or a driver reload) that
// renumbered them, a claim's device name means another GPU: the claim is
// not restored onto that GPU (its CDI spec would hand the pod someone
// else's GPU) but onto its own, found by UUID, whose device file its spec
// names now (issue 47); it keeps its GPU held by UUID, and a new claim of
// the name that now means its GPU is refused.
func TestRenumberedMinorsKeepEachClaimOnItsGPU(t *testing.T) {
	n := newNode(t, "h100x2", false)
	a := claim("a", dev(gpuName(0)))
	n.prepare(a)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	g0, g1 := n.inv.GPUs[0], n.inv.GPUs[1]
	m0, m1 := *g0, *g1
	m0.Minor, m1.Minor = 1, 0 // minors swapped
	n.devices[gpuName(0)].GPU, n.devices[gpuName(1)].GPU = &m1, &m0
	n.restart()
	report := n.state.RecoverLocal(context.Background())
	if report.Unrestored != 0 || report.Restored != 1 {
		t.Fatalf("claim a not restored onto its own GPU: %+v", report)
	}
	spec, err := os.ReadFile(n.cdi.SpecPath("a"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(spec), g1.UUID) || !strings.Contains(string(spec), g0.UUID) ||
		!strings.Contains(string(spec), strconv.Quote(n.sim.DevicePath(1))) || strings.Contains(string(spec), strconv.Quote(n.sim.DevicePath(0))) {
		t.Fatalf("claim a's CDI spec does not name its own GPU %s (minor 1 now) only:\n%s", g0.UUID, spec)
	}
	if _, err := n.tryPrepare(claim("b", dev(gpuName(1)))); err == nil || !strings.Contains(err.Error(), "claim a") {
		t.Fatalf("a new claim got GPU %s, which claim a holds: %v", g0.UUID, err)
	}
	n.unprepare(a)
	n.assertGone("a")
	n.prepare(claim("b", dev(gpuName(1))))
}
