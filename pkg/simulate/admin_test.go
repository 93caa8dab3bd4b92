// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestAdminActionsOnAnUnknownGPU(t *testing.T) {
	sim, _ := newSim(t, "h100x1")
	if err := sim.ResetGPU("GPU-nope"); err == nil || !strings.Contains(err.Error(), "GPU-nope") {
		t.Errorf("ResetGPU of an unknown GPU: %v, want an error naming it", err)
	}
	if err := sim.SetMigModeAsAdmin("GPU-nope", on); err == nil || !strings.Contains(err.Error(), "GPU-nope") {
		t.Errorf("SetMigModeAsAdmin of an unknown GPU: %v, want an error naming it", err)
	}
	if n := sim.MigInstanceCount("GPU-nope"); n != 0 {
		t.Errorf("MigInstanceCount of an unknown GPU = %d", n)
	}
	if n := sim.InjectXid("GPU-nope", 79); n != 0 {
		t.Errorf("an XID of an unknown GPU reached %d sets", n)
	}
}

// NVML refuses to turn MIG mode off while GPU instances exist. A disable
// made pending earlier (the GPU was in use) takes effect at the reset and
// removes the instances made since, with their files, for good: a
// restarted simulator does not bring them back.
func TestResetWithMIGOffRemovesEveryInstance(t *testing.T) {
	sim, dir := newSim(t, "h100x2:mig")
	dev, uuid := gpu(t, sim, 1)
	_, other := gpu(t, sim, 0)
	_ = sim.SetInUse(uuid, true)
	if act, ret := dev.SetMigMode(off); act != nvml.ERROR_IN_USE || ret != nvml.SUCCESS {
		t.Fatalf("disable while in use: (%s, %s)", nvml.ErrorString(act), nvml.ErrorString(ret))
	}
	_ = sim.SetInUse(uuid, false)
	a := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	b := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2)
	otherDev, _ := gpu(t, sim, 0)
	createMigDevice(t, otherDev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	if n := sim.MigInstanceCount(uuid); n != 2 {
		t.Fatalf("%d GPU instances, want 2", n)
	}
	if act, ret := otherDev.SetMigMode(off); act != nvml.SUCCESS || ret != nvml.ERROR_IN_USE || migMode(t, otherDev) != enabled {
		t.Errorf("disable with an instance: (%s, %s), mode %v; want IN_USE and MIG still on", nvml.ErrorString(act), nvml.ErrorString(ret), migMode(t, otherDev))
	}
	var files []string
	for _, h := range []nvml.Device{a, b} {
		u, _ := h.GetUUID()
		gi, _ := h.GetGpuInstanceId()
		ci, _ := h.GetComputeInstanceId()
		files = append(files, sim.MigDevicePath(u), sim.GICapPath(1, gi), sim.CICapPath(1, gi, ci))
	}
	for _, f := range files {
		if !exists(f) {
			t.Fatalf("%s missing while its instance exists", f)
		}
	}

	if err := sim.ResetGPU(uuid); err != nil {
		t.Fatal(err)
	}
	if got := migMode(t, dev); got != disable {
		t.Errorf("MIG mode after the reset %v, want off", got)
	}
	if n := sim.MigInstanceCount(uuid); n != 0 {
		t.Errorf("%d GPU instances after the reset, want 0", n)
	}
	for _, f := range files {
		if exists(f) {
			t.Errorf("%s outlived its instance", f)
		}
	}
	if n := sim.MigInstanceCount(other); n != 1 {
		t.Errorf("the other GPU lost its instance: %d left", n)
	}
	time.Sleep(10 * time.Millisecond)
	again, err := simulate.New(sim.Profile, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := again.MigInstanceCount(uuid); n != 0 {
		t.Errorf("a restart brought back %d instances", n)
	}
	if n := again.MigInstanceCount(other); n != 1 {
		t.Errorf("a restart lost the other GPU's instance: %d", n)
	}
}

// A reset with MIG mode unchanged keeps the instances.
func TestResetWithMIGOnKeepsInstances(t *testing.T) {
	sim, _ := newSim(t, "h100x1:mig")
	dev, uuid := gpu(t, sim, 0)
	createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	if err := sim.ResetGPU(uuid); err != nil {
		t.Fatal(err)
	}
	if n := sim.MigInstanceCount(uuid); n != 1 || migMode(t, dev) != enabled {
		t.Errorf("after a reset with MIG on: %d instances, mode %v", n, migMode(t, dev))
	}
}

func TestSetMigModeAsAdmin(t *testing.T) {
	// Ampere needs the reset, which the admin path does.
	sim, _ := newSim(t, "a30x1")
	dev, uuid := gpu(t, sim, 0)
	if err := sim.SetMigModeAsAdmin(uuid, on); err != nil {
		t.Fatal(err)
	}
	if got := migMode(t, dev); got != enabled {
		t.Errorf("A30 MIG mode %v, want on at once through the admin's reset", got)
	}
	// Hopper in use: the change stays pending and the reset fails.
	hsim, _ := newSim(t, "h100x1")
	hdev, huuid := gpu(t, hsim, 0)
	_ = hsim.SetInUse(huuid, true)
	if err := hsim.SetMigModeAsAdmin(huuid, on); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("MIG mode of a GPU in use: %v, want an error saying so", err)
	}
	if got := migMode(t, hdev); got != [2]int{off, on} {
		t.Errorf("MIG mode %v, want the enable pending", got)
	}
	_ = hsim.SetInUse(huuid, false)
	_ = hsim.SetUnprivileged(true)
	if err := hsim.SetMigModeAsAdmin(huuid, on); err == nil || !strings.Contains(err.Error(), nvml.ErrorString(nvml.ERROR_NO_PERMISSION)) {
		t.Errorf("unprivileged: %v, want NVML's no-permission error", err)
	}
}

// Capability minors: every GPU and compute instance of every GPU has its
// own, and mig-minors lists each once.
func TestCapabilityMinorsAreUniqueAcrossGPUs(t *testing.T) {
	seen := map[int]string{1: "config", 2: "monitor"}
	for g := range 8 {
		for gi := range 15 {
			for ci := -1; ci < 8; ci++ {
				name, minor := fmt.Sprintf("gpu%d/gi%d", g, gi), simulate.GICapMinor(g, gi)
				if ci >= 0 {
					name, minor = fmt.Sprintf("%s/ci%d", name, ci), simulate.CICapMinor(g, gi, ci)
				}
				if have, dup := seen[minor]; dup {
					t.Fatalf("minor %d of %s is that of %s", minor, name, have)
				}
				seen[minor] = name
			}
		}
	}
	sim, _ := newSim(t, "h100x8")
	data, err := os.ReadFile(filepath.Join(sim.ProcRoot(), "driver", "nvidia-caps", "mig-minors"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(seen) {
		t.Errorf("mig-minors has %d lines, want %d", len(lines), len(seen))
	}
	listed := map[string]bool{}
	for _, l := range lines {
		var name string
		var minor int
		if _, err := fmt.Sscanf(l, "%s %d", &name, &minor); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		want := strings.TrimSuffix(name, "/access")
		if seen[minor] != want || listed[name] {
			t.Errorf("line %q: minor %d is %s's", l, minor, seen[minor])
		}
		listed[name] = true
	}
}
