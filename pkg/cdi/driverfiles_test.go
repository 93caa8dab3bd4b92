// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
)

// A spec records the driver version its nvcdi edits were made for, and
// DriverStale finds a spec that an in-place upgrade left on another
// version, or on driver files that are gone (issue 55, defect 2).
func TestDriverStaleAfterAnInPlaceUpgrade(t *testing.T) {
	n := newNode(t, 1, true)
	w, err := NewWriter(t.TempDir(), "gpu.nvidia.com", n.edits(t))
	if err != nil {
		t.Fatal(err)
	}
	uid := types.UID("uid-1")
	if err := w.Write(uid, []Device{{Name: "gpu-0", UUID: n.nvml.UUID(0)}}, map[string]string{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Annotations(uid); got[DriverVersionAnnotation] != "550.54.15" || got["a"] != "b" {
		t.Fatalf("annotations %v, want the caller's and the driver version", got)
	}
	if why := w.DriverStale(uid); why != "" {
		t.Fatalf("a spec of the driver installed now is stale: %s", why)
	}

	// The same version with a library gone: the spec mounts it.
	lib := filepath.Join(n.root.Dir, cditest.LibDir, "libcuda.so.550.54.15")
	if err := os.Rename(lib, lib+".away"); err != nil {
		t.Fatal(err)
	}
	if why := w.DriverStale(uid); !strings.Contains(why, lib) {
		t.Errorf("with %s gone: %q", lib, why)
	}
	if err := os.Rename(lib+".away", lib); err != nil {
		t.Fatal(err)
	}

	n.root.Install(t, "580.95.05")
	n.nvml.DriverVersion = "580.95.05"
	if why := w.DriverStale(uid); !strings.Contains(why, "550.54.15") || !strings.Contains(why, "580.95.05") {
		t.Errorf("after the upgrade: %q, want both versions named", why)
	}
	if why := w.DriverStale("uid-none"); why != "" {
		t.Errorf("a claim without a spec: %q", why)
	}
}

// Specs carry host paths: a driver root mounted elsewhere in the plugin's
// container is looked up where the plugin sees it, and a path outside the
// host's driver root says nothing about the driver.
func TestOnDiskMapsHostPaths(t *testing.T) {
	n := newNode(t, 1, false)
	e, err := NewNvcdiEdits(n.nvml, NvcdiOptions{DriverRoot: n.root.Dir, HostDriverRoot: "/run/nvidia/driver", ProcRoot: n.root.Proc})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][2]bool{
		"/run/nvidia/driver/" + cditest.LibDir + "/libcuda.so.550.54.15": {true, true},
		"/run/nvidia/driver/" + cditest.LibDir + "/libcuda.so.535.1.1":   {false, true},
		"/var/lib/kubelet/plugins/mps/pipe":                              {false, false},
		"/run/nvidia/driverX/usr/bin/nvidia-smi":                         {false, false},
	} {
		if present, known := e.OnDisk(path); [2]bool{present, known} != want {
			t.Errorf("OnDisk(%s) = %v, %v; want %v", path, present, known, want)
		}
	}
}

// Simulated edits name no driver: no version is recorded and no spec is
// ever stale for the driver.
func TestSimulatedSpecsHaveNoDriver(t *testing.T) {
	w, err := NewWriter(t.TempDir(), "gpu.nvidia.com", SimulatedEdits{DevicePath: func(int) string { return "/sim/nvidia0" }, ControlDevicePath: "/sim/nvidiactl"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("uid-1", []Device{{Name: "gpu-0", UUID: "GPU-1"}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.Annotations("uid-1"); got[DriverVersionAnnotation] != "" {
		t.Errorf("a simulated spec records driver %q", got[DriverVersionAnnotation])
	}
	if why := w.DriverStale("uid-1"); why != "" {
		t.Errorf("a simulated spec is stale: %s", why)
	}
}
