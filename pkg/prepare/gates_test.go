// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Issue 47, defect 2: every chart value and feature gate (DynamicMIG,
// passthrough, MPS, time-slicing, monitor devices) turned off while claims
// use what it offered. The node may then publish none of their devices
// under their names; the claims keep their hardware, are restored at
// start from their records, and their unprepare undoes what the records
// say from the records alone: the MIG device destroyed and MIG mode off
// again, the MPS daemon stopped, the time slice back to the default, the
// VM's GPU bound back to nvidia.
func TestGatesTurnedOffUnderRunningClaims(t *testing.T) {
	n := newNode(t, "h100x3", true)
	n.withMPS()
	host := n.sim.VFIO()
	host.Timeout = 2e9
	n.passthrough = &PassthroughConfig{Host: host, Lookup: n.sim.DeviceGetHandleByUUID, Timeout: 2e9}
	for _, g := range n.inv.GPUs {
		n.devices[vfioName(g.Minor)] = &AllocatableDevice{Name: vfioName(g.Minor), Kind: configapi.VFIO, GPU: g}
		n.devices[monitorName(g.Minor)] = &AllocatableDevice{Name: monitorName(g.Minor), Kind: configapi.Monitor, GPU: g}
	}
	n.restart()
	n.withMPS()
	migMPS := claim("uid-mig", dev(n.mig(0, "1g.10gb", 0)))
	migMPS.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, testDriver, nil,
		`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS"}}`)}
	watch := claim("uid-watch", result{request: "gpu", device: monitorName(0), admin: true})
	vm := claim("uid-vm", dev(vfioName(1)))
	sliced := claim("uid-sliced", dev("gpu-2"))
	sliced.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, testDriver, nil, timeSlice("Long"))}
	claims := []*resourceapi.ResourceClaim{migMPS, watch, vm, sliced}
	ids := map[string][]string{}
	for _, c := range claims {
		for _, d := range n.prepare(c) {
			ids[string(c.UID)] = append(ids[string(c.UID)], d.CDIDeviceIDs...)
		}
	}
	rec, _ := n.store.Get(migMPS.UID)
	migTarget := rec.Devices[0].Sharing.Target

	// Every gate off: each GPU is published whole and nothing else (no
	// MIG device, monitor device or VM device), and neither MPS nor
	// time-slicing is offered to new claims.
	for name, d := range n.devices {
		if d.Kind != configapi.WholeGPU {
			delete(n.devices, name)
		} else {
			d.Partitionable = false
		}
	}
	n.restart()
	runner := n.withMPS()
	runner.running[migTarget] = true // the daemon outlives the plugin
	n.state.Sharing.Allowed = map[configapi.SharingStrategy]bool{}
	report := n.state.RecoverLocal(t.Context())
	if report.Unrestored != 0 {
		t.Errorf("claims not restored with every gate off: %+v", report)
	}
	for _, c := range claims {
		if e := n.state.Ledger.UnrestoredErr(c.UID); e != nil {
			t.Errorf("claim %s: %v", c.UID, e)
		}
		var got []string
		for _, d := range n.prepare(c) {
			got = append(got, d.CDIDeviceIDs...)
		}
		if !sameStrings(got, ids[string(c.UID)]) {
			t.Errorf("claim %s: prepare with every gate off answered %v, want %v", c.UID, got, ids[string(c.UID)])
		}
	}
	// Another claim cannot have what they hold.
	for _, name := range []string{"gpu-0", "gpu-1", "gpu-2"} {
		if _, err := n.tryPrepare(claim(types.UID("uid-intruder-"+name), dev(name))); err == nil {
			t.Errorf("%s was prepared for another claim while a claim holds its GPU", name)
		}
	}

	for _, c := range claims {
		n.unprepare(c)
		n.assertGone(c.UID)
	}
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
		t.Errorf("unprepare left %d MIG devices on GPU 0", got)
	}
	if mode := n.migMode(0); mode != nvml.DEVICE_MIG_DISABLE {
		t.Errorf("GPU 0 left in MIG mode %d", mode)
	}
	if len(runner.stopped) != 1 || runner.stopped[0] != migTarget {
		t.Errorf("unprepare stopped MPS daemons %v, want the MIG device's (%s)", runner.stopped, migTarget)
	}
	if got := n.bound(1); got != vfio.DriverNvidia {
		t.Errorf("the VM's GPU is on %q after unprepare", got)
	}
	if got := n.sim.TimeSlice(n.uuid(2)); got != string(configapi.DefaultTimeSlice) {
		t.Errorf("GPU 2's time slice is %s after unprepare", got)
	}
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
