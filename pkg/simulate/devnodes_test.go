// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"golang.org/x/sys/unix"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func rdev(t *testing.T, path string) (uint32, uint32, bool) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, 0, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Fatalf("%s is not a character device", path)
	}
	return unix.Major(st.Rdev), unix.Minor(st.Rdev), true
}

// Device nodes follow MIG instances, also those a restarted simulator
// restores; the driver's numbers; and a MIG device is found by its UUID.
func TestDeviceNodesFollowMIGInstances(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating device nodes needs CAP_MKNOD (run as root)")
	}
	sim, _ := newSim(t, "h100x2:mig")
	if err := sim.MakeDeviceNodes(); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(sim.DevRoot(), "dev")
	for name, want := range map[string][2]uint32{"nvidia1": {195, 1}, "nvidiactl": {195, 255}, "nvidia-uvm-tools": {simulate.UVMMajor, 1}, "nvidia-caps/nvidia-cap2": {simulate.CapsMajor, 2}} {
		if ma, mi, ok := rdev(t, filepath.Join(dev, name)); !ok || ma != want[0] || mi != want[1] {
			t.Errorf("%s: %d:%d (exists %v), want %d:%d", name, ma, mi, ok, want[0], want[1])
		}
	}
	h, _ := gpu(t, sim, 1)
	info := profileInfo(t, h, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	gi, ret := h.CreateGpuInstance(&info)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	giInfo, _ := gi.GetInfo()
	caps := []int{simulate.GICapMinor(1, int(giInfo.Id)), simulate.CICapMinor(1, int(giInfo.Id), 0)}
	for _, c := range caps {
		if ma, mi, ok := rdev(t, sim.CapDeviceNodePath(c)); !ok || ma != simulate.CapsMajor || int(mi) != c {
			t.Errorf("capability %d: %d:%d (exists %v)", c, ma, mi, ok)
		}
	}
	mig, _ := h.GetMigDeviceHandleByIndex(0)
	uuid, _ := mig.GetUUID()
	if found, ret := sim.DeviceGetHandleByUUID(uuid); ret != nvml.SUCCESS {
		t.Errorf("DeviceGetHandleByUUID(%s): %s", uuid, nvml.ErrorString(ret))
	} else if id, _ := found.GetGpuInstanceId(); id != int(giInfo.Id) {
		t.Errorf("found GPU instance %d, want %d", id, giInfo.Id)
	}
	if _, ret := sim.DeviceGetHandleByUUID("MIG-00000000-0000-0000-0000-000000000000"); ret == nvml.SUCCESS {
		t.Error("an unknown MIG UUID is found")
	}

	// A restart in devices mode restores the instance and its nodes.
	if err := os.RemoveAll(sim.DevRoot()); err != nil {
		t.Fatal(err)
	}
	again, err := simulate.New(sim.Profile, "n1", sim.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.MakeDeviceNodes(); err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		if _, _, ok := rdev(t, again.CapDeviceNodePath(c)); !ok {
			t.Errorf("capability %d not restored", c)
		}
	}
	if err := again.RemoveDeviceNodes(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(again.DevRoot()); !os.IsNotExist(err) {
		t.Errorf("dev root left: %v", err)
	}
}
