// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// The kernel's /proc/sys/kernel/random/boot_id: a version 4 UUID.
var bootIDForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\n$`)

func bootIDFile(t *testing.T, sim *simulate.Simulator) string {
	t.Helper()
	data, err := os.ReadFile(sim.BootIDPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bootIDForm.Match(data) {
		t.Fatalf("boot_id %q is not in the kernel's form", data)
	}
	if id := strings.TrimSuffix(string(data), "\n"); id != sim.BootID() {
		t.Fatalf("boot_id file %q, BootID() %q", id, sim.BootID())
	}
	return sim.BootID()
}

// migFiles lists a MIG device's files: its device file and capabilities.
func migFiles(t *testing.T, sim *simulate.Simulator, gpuMinor int, h nvml.Device) []string {
	t.Helper()
	u, _ := h.GetUUID()
	gi, _ := h.GetGpuInstanceId()
	ci, _ := h.GetComputeInstanceId()
	files := []string{sim.MigDevicePath(u), sim.GICapPath(gpuMinor, gi), sim.CICapPath(gpuMinor, gi, ci)}
	for _, f := range files {
		if !exists(f) {
			t.Fatalf("%s missing while its instance exists", f)
		}
	}
	return files
}

func reopen(t *testing.T, sim *simulate.Simulator, dir string) *simulate.Simulator {
	t.Helper()
	again, err := simulate.New(sim.Profile, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	return again
}

// The boot ID is made once per node directory, kept by a restart, and a
// malformed one is replaced.
func TestBootIDFile(t *testing.T) {
	sim, dir := newSim(t, "h100x1")
	id := bootIDFile(t, sim)
	if again := reopen(t, sim, dir); again.BootID() != id {
		t.Errorf("a restart changed the boot ID from %s to %s", id, again.BootID())
	}
	other, _ := newSim(t, "h100x1")
	if other.BootID() == id {
		t.Error("two nodes have the same boot ID")
	}
	if err := os.WriteFile(sim.BootIDPath(), []byte("not a boot id\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixed := reopen(t, sim, dir)
	if got := bootIDFile(t, fixed); got == id {
		t.Errorf("malformed boot ID replaced by the old one %s", got)
	}
	// One written before the first start (as a test may) is kept.
	fresh := filepath.Join(t.TempDir(), "sim")
	want := "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
	_ = os.MkdirAll(fresh, 0o755)
	if err := os.WriteFile(filepath.Join(fresh, "boot_id"), []byte(want+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pre := reopen(t, sim, fresh); pre.BootID() != want {
		t.Errorf("boot ID %s, want the one already in the directory %s", pre.BootID(), want)
	}
}

// A reboot of a Hopper node: every MIG instance and its files gone, MIG
// mode off, time slices and XID faults reset, a new boot ID, all of it
// persisted; a MIG device made again at the same placement has a new
// UUID, where a plain restart keeps it.
func TestRebootHopper(t *testing.T) {
	sim, dir := newSim(t, "h100x8")
	dev0, u0 := gpu(t, sim, 0)
	dev1, u1 := gpu(t, sim, 1)
	_, u2 := gpu(t, sim, 2)
	for _, u := range []string{u0, u1} {
		if err := sim.SetMigModeAsAdmin(u, on); err != nil {
			t.Fatal(err)
		}
	}
	a := createMigDevice(t, dev0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	b := createMigDevice(t, dev0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	c := createMigDevice(t, dev1, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2)
	var files []string
	files = append(files, migFiles(t, sim, 0, a)...)
	files = append(files, migFiles(t, sim, 0, b)...)
	files = append(files, migFiles(t, sim, 1, c)...)
	oldA, _ := a.GetUUID()
	if err := sim.SetTimeSlice(u2, "Long"); err != nil {
		t.Fatal(err)
	}
	sim.InjectXid(u2, 79)
	_ = sim.SetXIDFault(u2, "79")
	_ = sim.SetInUse(u1, true)
	_ = sim.SetLost(u2, true)
	if !sim.RecoveryPending(u2) {
		t.Fatal("XID 79 left no recovery action pending")
	}
	oldBoot := bootIDFile(t, sim)

	// A restart is not a reboot: same boot ID, same MIG devices.
	restarted := reopen(t, sim, dir)
	if restarted.BootID() != oldBoot || restarted.MigInstanceCount(u0) != 2 {
		t.Fatalf("after a restart: boot ID %s (was %s), %d instances", restarted.BootID(), oldBoot, restarted.MigInstanceCount(u0))
	}
	rdev0, _ := gpu(t, restarted, 0)
	if h := migHandleAt(t, rdev0, 4); h == nil {
		t.Fatal("no MIG device at slice 4 after a restart")
	} else if u, _ := h.GetUUID(); u != oldA {
		t.Fatalf("a restart changed the MIG UUID from %s to %s", oldA, u)
	}

	if err := sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	newBoot := bootIDFile(t, sim)
	if newBoot == oldBoot {
		t.Fatal("the boot ID did not change")
	}
	check := func(s *simulate.Simulator, when string) {
		t.Helper()
		for i := range 8 {
			dev, u := gpu(t, s, i)
			if n := s.MigInstanceCount(u); n != 0 {
				t.Errorf("%s: GPU %d has %d GPU instances", when, i, n)
			}
			if got := migMode(t, dev); got != disable {
				t.Errorf("%s: GPU %d MIG mode %v, want off", when, i, got)
			}
			if _, ret := dev.GetMigDeviceHandleByIndex(0); ret != nvml.ERROR_NOT_FOUND {
				t.Errorf("%s: GPU %d still hands out a MIG device: %s", when, i, nvml.ErrorString(ret))
			}
		}
		for _, f := range files {
			if exists(f) {
				t.Errorf("%s: %s outlived the reboot", when, f)
			}
		}
		if got := s.TimeSlice(u2); got != "Default" {
			t.Errorf("%s: time slice %q, want Default", when, got)
		}
		if s.RecoveryPending(u2) {
			t.Errorf("%s: recovery action still pending", when)
		}
		if s.BootID() != newBoot {
			t.Errorf("%s: boot ID %s, want %s", when, s.BootID(), newBoot)
		}
	}
	if exists(filepath.Join(dir, "faults", u2+".xid")) || exists(filepath.Join(dir, "faults", u1+".in-use")) {
		t.Error("an XID fault or in-use marker outlived the reboot")
	}
	if !sim.IsLost(u2) {
		t.Error("the reboot cleared an injected lost GPU")
	}
	_ = sim.SetLost(u2, false)
	check(sim, "after the reboot")
	again := reopen(t, sim, dir)
	check(again, "after the reboot and a restart")

	// MIG made again at the same placement: a new UUID.
	adev0, _ := gpu(t, again, 0)
	if err := again.SetMigModeAsAdmin(u0, on); err != nil {
		t.Fatal(err)
	}
	newA := createMigDevice(t, adev0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	u, _ := newA.GetUUID()
	if u == oldA || !strings.HasPrefix(u, "MIG-") {
		t.Errorf("MIG device UUID after the reboot %s, before %s; want a new one", u, oldA)
	}
	if !exists(again.MigDevicePath(u)) {
		t.Errorf("no device file for the re-created MIG device %s", u)
	}
}

// migHandleAt returns the MIG device at a placement start, or nil.
func migHandleAt(t *testing.T, dev nvml.Device, start uint32) nvml.Device {
	t.Helper()
	n, _ := dev.GetMaxMigDeviceCount()
	for i := range n {
		h, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			break
		}
		giID, _ := h.GetGpuInstanceId()
		gi, ret := dev.GetGpuInstanceById(giID)
		if ret != nvml.SUCCESS {
			t.Fatal(nvml.ErrorString(ret))
		}
		if info, _ := gi.GetInfo(); info.Placement.Start == start {
			return h
		}
	}
	return nil
}

// A reboot of an Ampere node: the instances go, MIG mode stays as stored
// (it is an InfoROM setting there), and a pending change takes effect.
func TestRebootAmpereKeepsMigMode(t *testing.T) {
	sim, dir := newSim(t, "a100-40gbx8:mig")
	dev0, u0 := gpu(t, sim, 0)
	dev1, _ := gpu(t, sim, 1)
	files := migFiles(t, sim, 0, createMigDevice(t, dev0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4))
	files = append(files, migFiles(t, sim, 0, createMigDevice(t, dev0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1))...)
	if act, ret := dev1.SetMigMode(off); act != nvml.ERROR_RESET_REQUIRED || ret != nvml.SUCCESS {
		t.Fatalf("disable on Ampere: (%s, %s), want a reset required", nvml.ErrorString(act), nvml.ErrorString(ret))
	}
	if got := migMode(t, dev1); got != [2]int{on, off} {
		t.Fatalf("MIG mode %v, want the disable pending", got)
	}
	oldBoot := sim.BootID()

	// Rebooted offline, as the e2e test does: by a simulator loaded while
	// no plugin runs.
	offline := reopen(t, sim, dir)
	if n := offline.MigInstanceCount(u0); n != 2 {
		t.Fatalf("%d instances before the reboot, want 2", n)
	}
	if err := offline.Reboot(); err != nil {
		t.Fatal(err)
	}
	after := reopen(t, sim, dir)
	if after.BootID() == oldBoot || after.BootID() != offline.BootID() {
		t.Errorf("boot ID after the reboot %s (rebooting simulator %s, before %s)", after.BootID(), offline.BootID(), oldBoot)
	}
	for i := range 8 {
		dev, u := gpu(t, after, i)
		want := enabled
		if i == 1 {
			want = disable
		}
		if got := migMode(t, dev); got != want {
			t.Errorf("GPU %d MIG mode %v after the reboot, want %v", i, got, want)
		}
		if n := after.MigInstanceCount(u); n != 0 {
			t.Errorf("GPU %d has %d GPU instances after the reboot", i, n)
		}
	}
	for _, f := range files {
		if exists(f) {
			t.Errorf("%s outlived the reboot", f)
		}
	}
	// MIG mode stayed on: instances can be made without an admin.
	adev0, _ := gpu(t, after, 0)
	createMigDevice(t, adev0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
}

func TestCheckNode(t *testing.T) {
	sim, dir := newSim(t, "h100x2:mig")
	if err := simulate.CheckNode(sim.Profile, "n1", dir); err != nil {
		t.Errorf("the node's own directory: %v", err)
	}
	p, _ := simulate.ParseProfile("h100x2")
	if err := simulate.CheckNode(p, "n1", dir); err != nil {
		t.Errorf("the same node without the MIG suffix: %v", err)
	}
	if err := simulate.CheckNode(sim.Profile, "n2", dir); err == nil {
		t.Error("another node name passed")
	}
	p8, _ := simulate.ParseProfile("h100x8")
	if err := simulate.CheckNode(p8, "n1", dir); err == nil {
		t.Error("another profile passed")
	}
	if err := simulate.CheckNode(sim.Profile, "n1", filepath.Join(dir, "nope")); err == nil {
		t.Error("a missing directory passed")
	}
}

// A node that never rebooted names its MIG devices as the simulator of
// 1b7ce73 (before Reboot existed) did, whatever its boot ID, so an earlier
// release and this one agree on them across a driver upgrade and rollback;
// from the first reboot on, the boot ID is part of the name.
func TestMigUUIDsBeforeTheFirstReboot(t *testing.T) {
	// Printed by 1b7ce73's simulator for GPU 0 of h100x8 on node n1, 3g
	// instance at slice 4.
	const gpu0, at1b7ce73 = "GPU-f92c07ad-4a23-6710-bf96-2d18b0f39d9a", "MIG-b5a1de6c-1824-6582-5b8b-10299bbeb22b"
	uuidAt4 := func(s *simulate.Simulator) string {
		t.Helper()
		dev, u := gpu(t, s, 0)
		if u != gpu0 {
			t.Fatalf("GPU 0 is %s, want %s", u, gpu0)
		}
		if err := s.SetMigModeAsAdmin(u, on); err != nil {
			t.Fatal(err)
		}
		h := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
		mu, _ := h.GetUUID()
		return mu
	}
	a, dirA := newSim(t, "h100x8")
	b, _ := newSim(t, "h100x8")
	if a.BootID() == b.BootID() {
		t.Fatal("two simulated nodes share a boot ID")
	}
	for _, s := range []*simulate.Simulator{a, b} {
		if got := uuidAt4(s); got != at1b7ce73 {
			t.Errorf("never rebooted: MIG device %s, want %s as 1b7ce73 named it", got, at1b7ce73)
		}
	}
	if err := a.Reboot(); err != nil {
		t.Fatal(err)
	}
	first := uuidAt4(a)
	if first == at1b7ce73 {
		t.Errorf("after a reboot the MIG device is still %s", first)
	}
	// A restart keeps the rebooted node's names.
	if got, _ := migHandleAt(t, gpuHandle(t, reopen(t, a, dirA), 0), 4).GetUUID(); got != first {
		t.Errorf("after a restart: %s, want %s", got, first)
	}
	if err := a.Reboot(); err != nil {
		t.Fatal(err)
	}
	if second := uuidAt4(a); second == first || second == at1b7ce73 {
		t.Errorf("second reboot: %s, first %s: want a new UUID each boot", second, first)
	}
}

func gpuHandle(t *testing.T, s *simulate.Simulator, i int) nvml.Device {
	t.Helper()
	dev, _ := gpu(t, s, i)
	return dev
}
