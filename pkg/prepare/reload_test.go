// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Issue 47, defect 1: a driver reload within one boot (nvidia.ko unloaded
// and loaded again, as a driver upgrade through the GPU Operator does)
// while a GPU is away (bound to vfio-pci for a VM, or off the bus) numbers
// the GPUs NVML sees again, in order: those after the absent one move
// down a minor. The boot ID is the same and every CDI spec is still on
// disk, so nothing said "reboot"; a spec written for /dev/nvidia<old
// minor> now gives its containers another GPU, another claim's.

// reloadDriver does to the node what a driver reload does while the GPUs
// of away are absent: the GPUs NVML sees get minors 0, 1, ... in order,
// the MIG devices of every GPU are gone (they do not outlive the driver;
// MIG mode does) and the node publishes what it sees, whole GPUs, monitor
// devices and, with dynamicMIG, every MIG placement. A GPU of away is not
// published at all. It returns each GPU's minor now (-1: away), by index.
func (n *node) reloadDriver(dynamicMIG bool, away ...int) []int {
	n.t.Helper()
	minors := make([]int, len(n.inv.GPUs))
	next := 0
	n.devices = map[string]*AllocatableDevice{}
	for i, g := range n.inv.GPUs {
		if existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles); err == nil {
			for _, m := range existing {
				if err := mig.Destroy(g.Device, m.GIID, m.CIID); err != nil {
					n.t.Fatal(err)
				}
			}
		}
		if isAway(away, i) {
			minors[i] = -1
			continue
		}
		w := *g
		w.Minor, minors[i] = next, next
		next++
		n.publishGPU(&w, dynamicMIG)
	}
	return minors
}

func isAway(away []int, i int) bool {
	for _, a := range away {
		if a == i {
			return true
		}
	}
	return false
}

// publishGPU publishes g whole, as its monitor device and, with
// dynamicMIG, as every MIG placement, under names of its minor now.
func (n *node) publishGPU(g *nvdev.GPU, dynamicMIG bool) {
	n.devices[gpuName(g.Minor)] = &AllocatableDevice{Name: gpuName(g.Minor), Kind: configapi.WholeGPU, GPU: g, Partitionable: dynamicMIG}
	n.devices[monitorName(g.Minor)] = &AllocatableDevice{Name: monitorName(g.Minor), Kind: configapi.Monitor, GPU: g}
	if !dynamicMIG {
		return
	}
	for _, prof := range g.MigProfiles {
		for _, pl := range prof.Placements {
			name := migName(g.Minor, prof.Name, pl.Start)
			n.devices[name] = &AllocatableDevice{Name: name, Kind: configapi.DynamicMIG, GPU: g, Placement: mig.Placement{Profile: prof, Start: pl.Start, Size: pl.Size}}
		}
	}
}

// withMPS gives the node's State an MPS whose daemons start at once
// (sweepingRunner: a control pipe each).
func (n *node) withMPS() *sweepingRunner {
	n.t.Helper()
	r := &sweepingRunner{running: map[string]bool{}}
	n.state.Sharing.Allowed[configapi.MpsStrategy] = true
	n.state.Sharing.MPS = &sharing.MPS{Root: filepath.Join(n.dir, "mps"), Runner: r, ReadyTimeout: 2e9}
	return r
}

// specOnlyOwnGPUs fails unless claim uid's CDI spec names the device file
// (at its minor now, -1: none) of each GPU in own and of no other GPU.
func (n *node) specOnlyOwnGPUs(uid types.UID, minors []int, own ...int) {
	n.t.Helper()
	spec, err := os.ReadFile(n.cdi.SpecPath(uid))
	if err != nil {
		n.t.Fatalf("claim %s's CDI spec: %v", uid, err)
	}
	for m := range len(n.inv.GPUs) {
		path := strconv.Quote(n.sim.DevicePath(m))
		owner := -1 // the GPU whose device file path is now
		for i, now := range minors {
			if now == m {
				owner = i
			}
		}
		has := bytes.Contains(spec, []byte(path))
		switch {
		case has && !isAway(own, owner):
			n.t.Errorf("claim %s (GPUs %v) has device file %s, which is GPU %d's now (minors %v): another claim's GPU", uid, own, n.sim.DevicePath(m), owner, minors)
		case !has && isAway(own, owner):
			n.t.Errorf("claim %s (GPUs %v) lacks the device file %s of its own GPU %d (minors %v)", uid, own, n.sim.DevicePath(m), owner, minors)
		}
	}
}

// claimAndGPU is a claim and the GPU (by index) that it holds.
type claimAndGPU struct {
	c   *resourceapi.ResourceClaim
	gpu int
}

func TestDriverReloadRenumbersKeptClaims(t *testing.T) {
	n := newNode(t, "h100x4", true)
	n.withMPS()
	lost := claim("uid-lost", dev("gpu-0"))
	whole := claim("uid-whole", dev("gpu-1"))
	watch := claim("uid-watch", result{request: "gpu", device: monitorName(1), admin: true})
	n.devices[monitorName(1)] = &AllocatableDevice{Name: monitorName(1), Kind: configapi.Monitor, GPU: n.inv.GPUs[1]}
	small := claim("uid-mig", dev(n.mig(2, "1g.10gb", 0)))
	shareA, shareB := share(claim("uid-share-a", dev("gpu-3")), "10Gi", ""), share(claim("uid-share-b", dev("gpu-3")), "10Gi", "")
	idB := types.UID("share-2")
	shareB.Status.Allocation.Devices.Results[0].ShareID = &idB
	ids := map[types.UID][]kubeletplugin.Device{}
	for _, c := range []*claimAndGPU{{lost, 0}, {whole, 1}, {watch, 1}, {small, 2}, {shareA, 3}, {shareB, 3}} {
		ids[c.c.UID] = n.prepare(c.c)
	}

	// GPU 0 goes away and the driver is reloaded: GPUs 1, 2 and 3 are
	// minors 0, 1 and 2 now, in the same boot, with every spec in place.
	minors := n.reloadDriver(true, 0)
	n.restart()
	n.withMPS()
	report := n.state.RecoverLocal(t.Context())
	t.Logf("start after the reload: %+v", report)

	for _, c := range []*claimAndGPU{{whole, 1}, {watch, 1}, {small, 2}, {shareA, 3}, {shareB, 3}} {
		if e := n.state.Ledger.UnrestoredErr(c.c.UID); e != nil {
			t.Errorf("claim %s, whose GPU %d moved to minor %d, is not restored: %v", c.c.UID, c.gpu, minors[c.gpu], e)
			continue
		}
		n.specOnlyOwnGPUs(c.c.UID, minors, c.gpu)
		// The kubelet's retry is answered with the same IDs, and the spec
		// they name still gives the claim its own GPU.
		if got := n.prepare(c.c); !sameIDs(got, ids[c.c.UID]) {
			t.Errorf("claim %s: prepare after the reload answered %v, want %v", c.c.UID, got, ids[c.c.UID])
		}
		n.specOnlyOwnGPUs(c.c.UID, minors, c.gpu)
	}
	// The MIG device the reload took is made again on the claim's own
	// GPU (2, minor 1 now), not on the GPU its old name means (3).
	if got := n.sim.MigInstanceCount(n.uuid(2)); got != 1 {
		t.Errorf("GPU 2 has %d MIG devices after the reload, want the claim's one again", got)
	}
	if got := n.sim.MigInstanceCount(n.uuid(3)); got != 0 {
		t.Errorf("GPU 3, which the MIG claim's old name means now, has %d MIG devices", got)
	}
	rec, _ := n.store.Get(small.UID)
	if d := rec.Devices[0]; d.Mig == nil || d.Mig.ParentUUID != n.uuid(2) || d.UUID == "" {
		t.Errorf("MIG claim's record after the reload: %+v", d)
	} else if spec, _ := os.ReadFile(n.cdi.SpecPath(small.UID)); !bytes.Contains(spec, []byte(d.UUID)) {
		t.Errorf("MIG claim's spec does not name its MIG device %s made again", d.UUID)
	}

	// GPU 0 is gone: its claim is not restored, and its spec, which names
	// /dev/nvidia0 (GPU 1 now, claim uid-whole's), is gone too.
	e := n.state.Ledger.UnrestoredErr(lost.UID)
	if e == nil {
		t.Error("the claim of the absent GPU 0 is reported restored")
	}
	if _, err := os.Stat(n.cdi.SpecPath(lost.UID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the claim of the absent GPU 0 keeps its CDI spec, which names /dev/nvidia0, GPU 1's now (stat: %v)", err)
	}
	if _, err := n.tryPrepare(lost); err == nil {
		t.Error("the kubelet's prepare of the absent GPU's claim succeeded")
	}

	// Unprepare undoes each claim on its own hardware.
	for _, c := range []*claimAndGPU{{lost, 0}, {whole, 1}, {watch, 1}, {small, 2}, {shareA, 3}, {shareB, 3}} {
		n.unprepare(c.c)
		n.assertGone(c.c.UID)
	}
	for i := range n.inv.GPUs {
		if got := n.sim.MigInstanceCount(n.uuid(i)); got != 0 {
			t.Errorf("GPU %d has %d MIG devices left", i, got)
		}
	}
}

// A VM's GPU on vfio-pci over a reload is not published (its recorded
// minor is another GPU's now): its claim keeps it, bound to vfio-pci, and
// unprepare binds it back from the record alone.
func TestDriverReloadKeepsVMClaim(t *testing.T) {
	n := passthroughNode(t, nil)
	vm := claim("uid-vm", dev(vfioName(0)))
	pod := claim("uid-pod", dev("gpu-1"))
	n.prepare(vm)
	n.prepare(pod)
	minors := n.reloadDriver(false, 0)
	n.restart()
	n.state.RecoverLocal(t.Context())
	for _, c := range []*claimAndGPU{{vm, 0}, {pod, 1}} {
		if e := n.state.Ledger.UnrestoredErr(c.c.UID); e != nil {
			t.Fatalf("claim %s not restored after the reload: %v", c.c.UID, e)
		}
	}
	n.specOnlyOwnGPUs(pod.UID, minors, 1)
	if got := n.bound(0); got != vfio.DriverVFIO {
		t.Fatalf("the VM's GPU is on %q after the reload", got)
	}
	n.unprepare(vm)
	if got := n.bound(0); got != vfio.DriverNvidia {
		t.Fatalf("the VM's GPU is on %q after unprepare, want nvidia", got)
	}
	n.unprepare(pod)
}
