// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"os"
	"strings"
	"testing"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// withMonitors publishes every GPU's monitor device too, with the Monitor
// kind the device table gives monitor entries.
func withMonitors(n *node) {
	n.t.Helper()
	for _, g := range n.inv.GPUs {
		name := deviceattr.MonitorDeviceName(g.Minor)
		n.devices[name] = &AllocatableDevice{Name: name, Kind: configapi.Monitor, GPU: g}
	}
	n.restart()
}

// TestMonitorNeedsAdminAccess: a monitor device allocated without admin
// access is refused before anything is touched, even on an idle GPU.
func TestMonitorNeedsAdminAccess(t *testing.T) {
	n := newNode(t, "h100x2", true)
	withMonitors(n)
	_, err := n.tryPrepare(claim("uid-m", dev("gpu-1-monitor")))
	if err == nil || !strings.Contains(err.Error(), "device gpu-1-monitor (request \"gpu\") is the monitor device of GPU "+n.uuid(1)+", which is only for admin access: request it with adminAccess: true") {
		t.Fatalf("error %v, want the admin-access refusal", err)
	}
	n.assertGone("uid-m")
	if mode := n.migMode(1); mode != 0 {
		t.Errorf("refused monitor claim left GPU 1 in MIG mode %d", mode)
	}
	// One refused device refuses the claim, admin access on the other
	// notwithstanding.
	if _, err := n.tryPrepare(claim("uid-m", result{request: "a", device: "gpu-0-monitor", admin: true}, dev("gpu-1-monitor"))); err == nil {
		t.Fatal("claim with a monitor device without admin access prepared")
	}
	n.assertGone("uid-m")
}

// TestMonitorOnBusyGPUs: with admin access, monitor devices of a GPU that
// runs a dynamic MIG device and of a GPU held whole prepare beside them,
// change no MIG state, give the container the whole GPU, and unprepare
// without touching the workloads.
func TestMonitorOnBusyGPUs(t *testing.T) {
	n := newNode(t, "h100x2", true)
	withMonitors(n)
	migClaim := claim("uid-mig", dev(n.mig(0, "1g.10gb", 0)))
	n.prepare(migClaim)
	wholeClaim := claim("uid-whole", dev("gpu-1"))
	n.prepare(wholeClaim)
	if n.migMode(0) != 1 || n.sim.MigInstanceCount(n.uuid(0)) != 1 {
		t.Fatalf("setup: GPU 0 MIG mode %d with %d instances, want 1 and 1", n.migMode(0), n.sim.MigInstanceCount(n.uuid(0)))
	}

	monitor := claim("uid-monitor", result{request: "all", device: "gpu-0-monitor", admin: true}, result{request: "all", device: "gpu-1-monitor", admin: true})
	devs := n.prepare(monitor)
	if len(devs) != 2 {
		t.Fatalf("prepared %d devices, want 2: %+v", len(devs), devs)
	}
	if n.migMode(0) != 1 || n.sim.MigInstanceCount(n.uuid(0)) != 1 || n.migMode(1) != 0 {
		t.Errorf("monitor changed MIG state: GPU 0 mode %d, %d instances; GPU 1 mode %d", n.migMode(0), n.sim.MigInstanceCount(n.uuid(0)), n.migMode(1))
	}
	rec, ok := n.store.Get("uid-monitor")
	if !ok || len(rec.Devices) != 2 {
		t.Fatalf("record %+v", rec)
	}
	for i, d := range rec.Devices {
		if d.UUID != n.uuid(i) || d.Mig != nil || !d.AdminAccess || d.Sharing != nil || d.Type != "gpu" {
			t.Errorf("device %d recorded as %+v, want GPU %s with admin access, no MIG, no sharing", i, d, n.uuid(i))
		}
	}
	spec, err := os.ReadFile(n.cdi.SpecPath("uid-monitor"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{n.sim.DevicePath(0), n.sim.DevicePath(1), "NVIDIA_VISIBLE_DEVICES=" + n.uuid(0) + "," + n.uuid(1)} {
		if !strings.Contains(string(spec), want) {
			t.Errorf("CDI spec lacks %q:\n%s", want, spec)
		}
	}

	// The monitor blocks nothing: another MIG device of GPU 0 prepares.
	other := claim("uid-mig2", dev(n.mig(0, "1g.10gb", 1)))
	n.prepare(other)
	n.unprepare(monitor)
	n.assertGone("uid-monitor")
	if n.migMode(0) != 1 || n.sim.MigInstanceCount(n.uuid(0)) != 2 {
		t.Errorf("unpreparing the monitor changed GPU 0: mode %d, %d instances, want 1 and 2", n.migMode(0), n.sim.MigInstanceCount(n.uuid(0)))
	}
	// The workloads still hold their hardware and release it as before.
	if _, err := n.tryPrepare(claim("uid-x", dev("gpu-1"))); err == nil || !strings.Contains(err.Error(), "uid-whole") {
		t.Errorf("whole GPU 1 while uid-whole holds it: %v", err)
	}
	n.unprepare(migClaim)
	n.unprepare(other)
	if n.migMode(0) != 0 || n.sim.MigInstanceCount(n.uuid(0)) != 0 {
		t.Errorf("GPU 0 after its MIG claims: mode %d, %d instances, want 0 and 0", n.migMode(0), n.sim.MigInstanceCount(n.uuid(0)))
	}
	n.unprepare(wholeClaim)
}
