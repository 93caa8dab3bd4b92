// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package vfio_test

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

func sim(t *testing.T) *simulate.Simulator {
	t.Helper()
	p, err := simulate.ParseProfile("h100x2")
	if err != nil {
		t.Fatal(err)
	}
	s, err := simulate.New(p, "node", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A GPU goes to vfio-pci and back through driver_override, unbind and bind;
// NVML loses it while it is away and finds it again after.
func TestBindRoundTrip(t *testing.T) {
	s := sim(t)
	h := s.VFIO()
	addr := simulate.PCIBusID(0)
	if d, err := h.Driver(addr); err != nil || d != vfio.DriverNvidia {
		t.Fatalf("driver at start %q %v, want nvidia", d, err)
	}
	group, err := h.CheckGroup(addr)
	if err != nil || group != simulate.IOMMUGroup(0) {
		t.Fatalf("group %q %v", group, err)
	}
	if err := h.Bind(addr, vfio.DriverVFIO); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.Driver(addr); d != vfio.DriverVFIO {
		t.Fatalf("driver after bind %q", d)
	}
	if o, _ := os.ReadFile(filepath.Join(s.SysfsRoot(), "bus/pci/devices", addr, "driver_override")); strings.TrimSpace(string(o)) != vfio.DriverVFIO {
		t.Fatalf("driver_override %q", o)
	}
	if err := h.WaitGroupNode(group); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DeviceGetCount(); n != 1 {
		t.Fatalf("NVML sees %d GPUs with one on vfio-pci, want 1", n)
	}
	if _, ret := s.DeviceGetHandleByPciBusId(addr); ret == nvml.SUCCESS {
		t.Fatal("NVML still finds the GPU bound to vfio-pci by bus ID")
	}
	// Idempotent: a second call after a crash finishes without error.
	if err := h.Bind(addr, vfio.DriverVFIO); err != nil {
		t.Fatal(err)
	}
	if err := h.Bind(addr, vfio.DriverNvidia); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DeviceGetCount(); n != 2 {
		t.Fatalf("NVML sees %d GPUs after rebinding, want 2", n)
	}
	if _, err := os.Stat(h.GroupNode(group)); !os.IsNotExist(err) {
		t.Fatalf("%s outlives the vfio-pci binding: %v", h.GroupNode(group), err)
	}
}

// A crash between unbind and bind leaves the GPU with no driver; Bind
// starts from there.
func TestBindFinishesAfterUnbind(t *testing.T) {
	s := sim(t)
	h := s.VFIO()
	addr := simulate.PCIBusID(1)
	if err := s.WriteSysfs(filepath.Join(s.SysfsRoot(), "bus/pci/drivers/nvidia/unbind"), addr); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.Driver(addr); d != "" {
		t.Fatalf("driver after unbind %q", d)
	}
	if err := h.Bind(addr, vfio.DriverNvidia); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.Driver(addr); d != vfio.DriverNvidia {
		t.Fatalf("driver %q", d)
	}
}

// The simulated kernel refuses a bind that driver_override forbids, and a
// bind over another driver, as the real one does.
func TestSimulatedKernelRefuses(t *testing.T) {
	s := sim(t)
	addr := simulate.PCIBusID(0)
	drivers := filepath.Join(s.SysfsRoot(), "bus/pci/drivers")
	if err := s.WriteSysfs(filepath.Join(drivers, "vfio-pci/bind"), addr); err == nil {
		t.Fatal("bind over nvidia succeeded")
	}
	_ = s.WriteSysfs(filepath.Join(s.SysfsRoot(), "bus/pci/devices", addr, "driver_override"), "nvidia")
	_ = s.WriteSysfs(filepath.Join(drivers, "nvidia/unbind"), addr)
	if err := s.WriteSysfs(filepath.Join(drivers, "vfio-pci/bind"), addr); err == nil {
		t.Fatal("bind against driver_override succeeded")
	}
}

// A group that holds another device is refused, naming it.
func TestCheckGroupRefusesForeignDevice(t *testing.T) {
	s := sim(t)
	h := s.VFIO()
	addr := simulate.PCIBusID(0)
	other := filepath.Join(s.SysfsRoot(), "kernel/iommu_groups", simulate.IOMMUGroup(0), "devices", "0000:99:00.0")
	if err := os.Symlink("/nonexistent", other); err != nil {
		t.Fatal(err)
	}
	_, err := h.CheckGroup(addr)
	if err == nil || !strings.Contains(err.Error(), "0000:99:00.0") {
		t.Fatalf("CheckGroup = %v, want a refusal naming 0000:99:00.0", err)
	}
}

func TestNoIOMMU(t *testing.T) {
	h := vfio.Host{SysfsRoot: t.TempDir()}
	addr := "0000:18:00.0"
	if err := os.MkdirAll(filepath.Join(h.SysfsRoot, "bus/pci/devices", addr), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := h.CheckGroup(addr); err == nil || !strings.Contains(err.Error(), "intel_iommu=on") {
		t.Fatalf("CheckGroup = %v, want the IOMMU hint", err)
	}
	if vfio.ValidAddress("../../etc") || !vfio.ValidAddress(addr) {
		t.Fatal("ValidAddress")
	}
}

// A reboot binds every GPU to nvidia again.
func TestRebootRebinds(t *testing.T) {
	s := sim(t)
	h := s.VFIO()
	addr := simulate.PCIBusID(0)
	if err := h.Bind(addr, vfio.DriverVFIO); err != nil {
		t.Fatal(err)
	}
	// A restarted plugin (a new Simulator on the same directory) keeps it.
	p, _ := simulate.ParseProfile("h100x2")
	s2, err := simulate.New(p, "node", s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s2.DeviceGetCount(); n != 1 || s2.BoundDriver(addr) != vfio.DriverVFIO {
		t.Fatalf("after restart: %d GPUs, driver %q", n, s2.BoundDriver(addr))
	}
	if err := s2.Reboot(); err != nil {
		t.Fatal(err)
	}
	if d, _ := s2.VFIO().Driver(addr); d != vfio.DriverNvidia {
		t.Fatalf("after reboot driver %q", d)
	}
	if n, _ := s2.DeviceGetCount(); n != 2 {
		t.Fatalf("after reboot NVML sees %d", n)
	}
}

// A sysfs write that blocks in the kernel (an unbind while another process
// holds the GPU's device node) gives up after WriteTimeout, is not issued
// again while it is still blocked, and is issued again once it returned.
// The driver's unbind attribute is a FIFO here: a real write to it blocks
// until someone reads, as the kernel's does until the holder lets go.
func TestBlockedWriteGivesUp(t *testing.T) {
	s := sim(t)
	h := s.VFIO()
	h.Write = nil // the kernel path, on the simulated tree
	h.WriteTimeout = 100 * time.Millisecond
	unbind := filepath.Join(s.SysfsRoot(), "bus/pci/drivers", vfio.DriverNvidia, "unbind")
	if err := os.Remove(unbind); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(unbind, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := simulate.PCIBusID(0)
	start := time.Now()
	err := h.Bind(addr, vfio.DriverVFIO)
	if err == nil || !strings.Contains(err.Error(), "did not return within") {
		t.Fatalf("blocked unbind: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Bind took %s with a 100ms write timeout", took)
	}
	if err := h.Bind(addr, vfio.DriverVFIO); err == nil || !strings.Contains(err.Error(), "has not returned") {
		t.Fatalf("second bind while the first unbind is still in the kernel: %v", err)
	}
	// The holder lets go: the blocked write returns.
	r, err := os.OpenFile(unbind, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := h.Bind(addr, vfio.DriverVFIO)
		if err == nil || !strings.Contains(err.Error(), "has not returned") {
			break // issued again (this tree has no kernel to bind it)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the write is still refused after the kernel let go: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Addresses lists the PCI devices sysfs has, GPUs and their audio
// functions alike.
func TestAddresses(t *testing.T) {
	s := sim(t)
	got, err := s.VFIO().Addresses()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{simulate.PCIBusID(0), simulate.PCIBusID(1)} {
		if !slices.Contains(got, want) {
			t.Errorf("addresses %v lack GPU %s", got, want)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("addresses %v not sorted", got)
	}
}
