// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func TestParseProfile(t *testing.T) {
	p, err := simulate.ParseProfile("a100-80gbx4:mig")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "a100-80gbx4" || p.Count != 4 || !p.MigEnabled {
		t.Fatalf("parsed %q: name %q count %d MIG %v", "a100-80gbx4:mig", p.Name, p.Count, p.MigEnabled)
	}
	if p, _ := simulate.ParseProfile("h100x8"); p.MigEnabled || p.Count != 8 {
		t.Fatalf("h100x8: count %d MIG %v", p.Count, p.MigEnabled)
	}
	for in, want := range map[string]string{
		"h100":       "want <model>x<count>",
		"x8":         "want <model>x<count>",
		"v100x2":     `unknown model "v100"; models: a100-40gb, a100-80gb, a30, b200, gh200, h100, h200`,
		"h100x0":     `GPU count "0" must be a number from 1 to 64`,
		"h100x65":    `GPU count "65"`,
		"h100xeight": `GPU count "eight"`,
		"h100x2:MIG": `GPU count "2:MIG"`,
	} {
		if _, err := simulate.ParseProfile(in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseProfile(%q): %v, want an error naming the value and %q", in, err, want)
		}
	}
}

func uuids(t *testing.T, profile, node string) []string {
	t.Helper()
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, node, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range p.Count {
		_, uuid := gpu(t, sim, i)
		out = append(out, uuid)
	}
	return out
}

// TestIdentitiesAreStable: a restarted plugin (a new simulator, even in
// another directory) sees the same GPUs; another node, or another model,
// has other GPUs; turning MIG mode on changes no identity.
func TestIdentitiesAreStable(t *testing.T) {
	first := uuids(t, "h100x4", "n1")
	seen := map[string]bool{}
	for _, u := range first {
		if seen[u] || !strings.HasPrefix(u, "GPU-") {
			t.Fatalf("UUIDs %v: duplicate or malformed", first)
		}
		seen[u] = true
	}
	if again := uuids(t, "h100x4", "n1"); strings.Join(again, ",") != strings.Join(first, ",") {
		t.Fatalf("same node, new simulator: %v, was %v", again, first)
	}
	if mig := uuids(t, "h100x4:mig", "n1"); strings.Join(mig, ",") != strings.Join(first, ",") {
		t.Fatalf("MIG mode on changed identities: %v, was %v", mig, first)
	}
	for _, other := range [][]string{uuids(t, "h100x4", "n2"), uuids(t, "h200x4", "n1")} {
		for _, u := range other {
			if seen[u] {
				t.Fatalf("GPU %s also appears on another node or model", u)
			}
		}
	}
}

// TestMigDevicesSurviveRestart: MIG devices live on the GPU, not in the
// plugin; a new simulator over the same directory has the same devices
// with the same UUIDs and files, and can destroy them.
func TestMigDevicesSurviveRestart(t *testing.T) {
	sim, dir := newSim(t, "h100x2:mig")
	dev, uuid := gpu(t, sim, 1)
	mig := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	migUUID, _ := mig.GetUUID()
	giID, _ := mig.GetGpuInstanceId()
	if _, err := os.Stat(sim.MigDevicePath(migUUID)); err != nil {
		t.Fatalf("MIG device file: %v", err)
	}

	again, err := simulate.New(sim.Profile, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.MigInstanceCount(uuid); got != 1 {
		t.Fatalf("%d GPU instances after restart, want 1", got)
	}
	if _, other := gpu(t, again, 0); again.MigInstanceCount(other) != 0 {
		t.Fatal("the other GPU gained an instance")
	}
	dev2, _ := gpu(t, again, 1)
	h, ret := dev2.GetMigDeviceHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("MIG handle after restart: %s", nvml.ErrorString(ret))
	}
	if u, _ := h.GetUUID(); u != migUUID {
		t.Fatalf("MIG device UUID %s after restart, was %s", u, migUUID)
	}
	gi, ret := dev2.GetGpuInstanceById(giID)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU instance %d after restart: %s", giID, nvml.ErrorString(ret))
	}
	ciID, _ := h.GetComputeInstanceId()
	ci, ret := gi.GetComputeInstanceById(ciID)
	if ret != nvml.SUCCESS {
		t.Fatalf("compute instance %d after restart: %s", ciID, nvml.ErrorString(ret))
	}
	if ret := ci.Destroy(); ret != nvml.SUCCESS {
		t.Fatalf("destroy compute instance: %s", nvml.ErrorString(ret))
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatalf("destroy GPU instance: %s", nvml.ErrorString(ret))
	}
	if again.MigInstanceCount(uuid) != 0 {
		t.Fatal("instance still counted after destroy")
	}
	if _, err := os.Stat(again.MigDevicePath(migUUID)); !os.IsNotExist(err) {
		t.Fatalf("MIG device file left after destroy: %v", err)
	}
}

// TestTimeSliceIsPerGPU: the time slice is a property of the GPU: it starts
// at Default, is set per GPU and survives a restart of the plugin.
func TestTimeSliceIsPerGPU(t *testing.T) {
	sim, dir := newSim(t, "h100x2")
	_, u0 := gpu(t, sim, 0)
	_, u1 := gpu(t, sim, 1)
	if got := sim.TimeSlice(u0); got != "Default" {
		t.Fatalf("initial time slice %q", got)
	}
	if err := sim.SetTimeSlice(u0, "Long"); err != nil {
		t.Fatal(err)
	}
	again, err := simulate.New(sim.Profile, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.TimeSlice(u0); got != "Long" {
		t.Fatalf("time slice after restart %q, want Long", got)
	}
	if got := again.TimeSlice(u1); got != "Default" {
		t.Fatalf("other GPU's time slice %q, want Default", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "compute-policy", u1)); !os.IsNotExist(err) {
		t.Fatalf("a GPU never set has a recorded time slice: %v", err)
	}
}
