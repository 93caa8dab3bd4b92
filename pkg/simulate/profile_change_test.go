// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// redeploy builds the simulator of profile over dir, as the plugin does
// when the node's profile was changed (or not) between two runs.
func redeploy(t *testing.T, profile, dir string) *simulate.Simulator {
	t.Helper()
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	return sim
}

// captureLog collects what klog's global logger writes until the test ends.
func captureLog(t *testing.T) func() string {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	klog.SetLogger(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}))
	t.Cleanup(klog.ClearLogger)
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n")
	}
}

// TestProfileChangeTurnsMigModeOn (issue 28, item 10): a node deployed as
// a100-40gbx8 and then as a100-40gbx8:mig is a node whose admin turned MIG
// mode on (nvidia-smi -mig 1 and a GPU reset): every GPU is in MIG mode,
// a pending mode included, and MIG devices can be created.
func TestProfileChangeTurnsMigModeOn(t *testing.T) {
	sim, dir := newSim(t, "a100-40gbx8")
	dev, uuid := gpu(t, sim, 0)
	if got := migMode(t, dev); got != disable {
		t.Fatalf("a100-40gbx8: MIG mode %v, want off", got)
	}
	// GPU 1 has an enable pending (nvidia-smi -mig 1 without the reset):
	// the admin's change completes it.
	dev1, _ := gpu(t, sim, 1)
	if _, ret := dev1.SetMigMode(on); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	log := captureLog(t)

	again := redeploy(t, "a100-40gbx8:mig", dir)
	for i := range 8 {
		d, u := gpu(t, again, i)
		if i == 0 && u != uuid {
			t.Fatalf("GPU 0 is %s with MIG mode on, was %s", u, uuid)
		}
		if got := migMode(t, d); got != enabled {
			t.Errorf("GPU %d after a100-40gbx8 -> a100-40gbx8:mig: MIG mode (current, pending) %v, want %v", i, got, enabled)
		}
	}
	if l := log(); strings.Count(l, "Simulated profile changed MIG mode") != 8 || !strings.Contains(l, uuid) {
		t.Errorf("want one log line per GPU naming it, got:\n%s", l)
	}
	dev, _ = gpu(t, again, 0)
	mig := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	migUUID, _ := mig.GetUUID()

	// The same profile again is a plain restart: the MIG device stays.
	third := redeploy(t, "a100-40gbx8:mig", dir)
	if n := third.MigInstanceCount(uuid); n != 1 {
		t.Fatalf("%d GPU instances after a restart with the same profile, want 1", n)
	}
	if h := migHandleAt(t, gpuHandle(t, third, 0), 0); h == nil {
		t.Fatal("no MIG device after a restart with the same profile")
	} else if u, _ := h.GetUUID(); u != migUUID {
		t.Fatalf("MIG device %s after a restart, was %s", u, migUUID)
	}
}

// TestProfileChangeTurnsMigModeOnHopper: on Hopper the admin's change
// needs no reset; the result is the same.
func TestProfileChangeTurnsMigModeOnHopper(t *testing.T) {
	_, dir := newSim(t, "h100x2")
	again := redeploy(t, "h100x2:mig", dir)
	for i := range 2 {
		if got := migMode(t, gpuHandle(t, again, i)); got != enabled {
			t.Errorf("GPU %d after h100x2 -> h100x2:mig: MIG mode %v, want on", i, got)
		}
	}
	createMigDevice(t, gpuHandle(t, again, 1), nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
}

// TestProfileChangeTurnsMigModeOff: the reverse, a100-40gbx8:mig then
// a100-40gbx8, is an admin who destroyed the MIG devices and turned MIG
// mode off: none is left, nor its files, and the GPU is whole again. On
// Hopper the same holds.
func TestProfileChangeTurnsMigModeOff(t *testing.T) {
	for _, model := range []string{"a100-40gb", "h100"} {
		t.Run(model, func(t *testing.T) {
			sim, dir := newSim(t, model+"x2:mig")
			dev, uuid := gpu(t, sim, 0)
			mig := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
			files := migFiles(t, sim, 0, mig)
			log := captureLog(t)

			again := redeploy(t, model+"x2", dir)
			for i := range 2 {
				if got := migMode(t, gpuHandle(t, again, i)); got != disable {
					t.Errorf("GPU %d after %sx2:mig -> %sx2: MIG mode %v, want off", i, model, model, got)
				}
			}
			if n := again.MigInstanceCount(uuid); n != 0 {
				t.Errorf("%d GPU instances with MIG mode off", n)
			}
			for _, f := range files {
				if exists(f) {
					t.Errorf("%s left behind with MIG mode off", f)
				}
			}
			dev, _ = gpu(t, again, 0)
			if cores, ret := dev.GetNumGpuCores(); ret != nvml.SUCCESS || cores == 0 {
				t.Errorf("the whole GPU: %d cores, %s", cores, nvml.ErrorString(ret))
			}
			info := profileInfo(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
			if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 0, Size: 1}); ret != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("GPU instance with MIG mode off: %s, want NOT_SUPPORTED", nvml.ErrorString(ret))
			}
			if l := log(); !strings.Contains(l, uuid) || !strings.Contains(l, `"to"="disabled"`) {
				t.Errorf("the change is not logged:\n%s", l)
			}
		})
	}
}

// TestSameProfileKeepsDriverMigMode: on Hopper the driver turns MIG mode on
// by itself; a restart with the same profile (no :mig) keeps that mode and
// the MIG devices, as a real node does.
func TestSameProfileKeepsDriverMigMode(t *testing.T) {
	sim, dir := newSim(t, "h100x1")
	dev, uuid := gpu(t, sim, 0)
	if activation, ret := dev.SetMigMode(on); ret != nvml.SUCCESS || activation != nvml.SUCCESS {
		t.Fatalf("SetMigMode: (%s, %s)", nvml.ErrorString(activation), nvml.ErrorString(ret))
	}
	createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	log := captureLog(t)
	again := redeploy(t, "h100x1", dir)
	if got := migMode(t, gpuHandle(t, again, 0)); got != enabled {
		t.Errorf("MIG mode %v after a restart, want the driver's (on)", got)
	}
	if n := again.MigInstanceCount(uuid); n != 1 {
		t.Errorf("%d GPU instances after a restart, want 1", n)
	}
	if l := log(); strings.Contains(l, "Simulated profile changed") {
		t.Errorf("a restart with the same profile logs a change:\n%s", l)
	}
}

// TestSameProfileAfterReboot: a Hopper GPU comes back from a reboot with
// MIG mode off whatever the profile says (reboot.go); the plugin starting
// again with the same :mig profile keeps it off, as on a real node.
func TestSameProfileAfterReboot(t *testing.T) {
	sim, dir := newSim(t, "h100x1:mig")
	if err := sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	again := redeploy(t, "h100x1:mig", dir)
	if got := migMode(t, gpuHandle(t, again, 0)); got != disable {
		t.Errorf("MIG mode %v after a reboot and a restart with the same profile, want off", got)
	}
}

// stripProfileModes rewrites the MIG state of dir as simulators before the
// recorded profile mode wrote it.
func stripProfileModes(t *testing.T, dir string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "mig-state", "mig-state.*.json"))
	if len(paths) != 1 {
		t.Fatalf("MIG state files %v, want one", paths)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	for _, st := range state {
		delete(st, "profileMigMode")
	}
	if data, err = json.Marshal(state); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(paths[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestOlderStateWithoutProfileMode: a state written before the profile's
// MIG mode was recorded. On Ampere, whose MIG mode only an admin changes,
// a mode other than the profile's is a changed profile; on Hopper it is
// the driver's own, kept with its MIG devices (an upgrade keeps claims).
func TestOlderStateWithoutProfileMode(t *testing.T) {
	t.Run("ampere", func(t *testing.T) {
		_, dir := newSim(t, "a100-40gbx1")
		stripProfileModes(t, dir)
		again := redeploy(t, "a100-40gbx1:mig", dir)
		if got := migMode(t, gpuHandle(t, again, 0)); got != enabled {
			t.Errorf("MIG mode %v, want on as a100-40gbx1:mig says", got)
		}
	})
	t.Run("ampere-same", func(t *testing.T) {
		sim, dir := newSim(t, "a100-40gbx1:mig")
		dev, uuid := gpu(t, sim, 0)
		createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
		stripProfileModes(t, dir)
		again := redeploy(t, "a100-40gbx1:mig", dir)
		if n := again.MigInstanceCount(uuid); n != 1 {
			t.Errorf("%d GPU instances, want 1", n)
		}
	})
	t.Run("hopper", func(t *testing.T) {
		sim, dir := newSim(t, "h100x1")
		dev, uuid := gpu(t, sim, 0)
		if _, ret := dev.SetMigMode(on); ret != nvml.SUCCESS {
			t.Fatal(nvml.ErrorString(ret))
		}
		createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
		stripProfileModes(t, dir)
		again := redeploy(t, "h100x1", dir)
		if got := migMode(t, gpuHandle(t, again, 0)); got != enabled {
			t.Errorf("MIG mode %v, want the driver's (on)", got)
		}
		if n := again.MigInstanceCount(uuid); n != 1 {
			t.Errorf("%d GPU instances, want 1", n)
		}
		// Recorded now: the profile's change is applied from here on.
		paths, _ := filepath.Glob(filepath.Join(dir, "mig-state", "mig-state.*.json"))
		if data, err := os.ReadFile(paths[len(paths)-1]); err != nil || !strings.Contains(string(data), `"profileMigMode":0`) {
			t.Errorf("the state is not recorded under the profile (%v): %s", err, data)
		}
	})
}
