// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"golang.org/x/sys/unix"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// hostRoot is NVIDIA's R535 userspace in the host layout, which make test
// unpacks (hack/nvidia-userspace.sh) and names in GDRA_NVIDIA_HOST_ROOT.
func hostRoot(t *testing.T) string {
	t.Helper()
	root := os.Getenv("GDRA_NVIDIA_HOST_ROOT")
	if root == "" {
		t.Skip("GDRA_NVIDIA_HOST_ROOT unset: run make test, or set it to $(hack/nvidia-userspace.sh --print-root host)")
	}
	return root
}

func charDev(t *testing.T, path string) (uint32, uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("device node: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Fatalf("%s is not a character device (mode %o)", path, st.Mode)
	}
	return unix.Major(st.Rdev), unix.Minor(st.Rdev)
}

func TestDriverVersionInTheRealRoot(t *testing.T) {
	root := hostRoot(t)
	v, err := DriverVersionIn(root)
	if err != nil || v != "535.261.03" {
		t.Fatalf("DriverVersionIn = %q, %v; want 535.261.03", v, err)
	}
	if c, ok := cudaVersionOf(v); !ok || c != 12020 {
		t.Errorf("CUDA version of %s: %d, want 12020 (libcuda's cuDriverGetVersion)", v, c)
	}
	if _, err := DriverVersionIn(t.TempDir()); err == nil {
		t.Error("an empty root has a driver version")
	}
}

// In the devices node mode the plugin's CDI edits are nvcdi's over the real
// R535 root: its libraries, hooks, and the simulator's real device nodes,
// all at host paths; a MIG device adds its capability nodes.
func TestDevicesNodeModeUsesNvcdiOverTheRealRoot(t *testing.T) {
	root := hostRoot(t)
	if os.Geteuid() != 0 {
		t.Skip("creating device nodes needs CAP_MKNOD (run as root)")
	}
	state := t.TempDir()
	hookDir := t.TempDir()
	hookSrc := filepath.Join(t.TempDir(), cdi.HookName)
	writeExecutable(t, hookSrc, "#!/bin/sh\n")
	const hostRoot = "/host/driver"
	b, err := Open(Options{SimulateProfile: "h100x2", SimulateNodeMode: NodeModeDevices, NodeName: "n", StateDir: state,
		DriverRoot: root, HostDriverRoot: hostRoot, HookInstallDir: hookDir, HookSource: hookSrc})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Edits.(*cdi.NvcdiEdits); !ok {
		t.Fatalf("edits %T, want nvcdi's", b.Edits)
	}
	if v, _ := b.NVML.SystemGetDriverVersion(); v != "535.261.03" || b.TimeSlicer != b.Simulator || b.MPSLauncher != nil {
		t.Errorf("driver %s, time slicer %T, MPS launcher %T: want the root's version, the simulator's slices, daemons in pods",
			v, b.TimeSlicer, b.MPSLauncher)
	}
	sim := b.Simulator
	dev := filepath.Join(sim.DevRoot(), "dev")
	for name, want := range map[string][2]uint32{"nvidia0": {195, 0}, "nvidia1": {195, 1}, "nvidiactl": {195, 255},
		"nvidia-uvm": {simulate.UVMMajor, 0}, "nvidia-caps/nvidia-cap1": {simulate.CapsMajor, 1}} {
		if ma, mi := charDev(t, filepath.Join(dev, name)); ma != want[0] || mi != want[1] {
			t.Errorf("%s is %d:%d, want %d:%d", name, ma, mi, want[0], want[1])
		}
	}

	gpu := b.Inventory.GPUs[1]
	common, err := b.Edits.ForClaim(nil)
	if err != nil {
		t.Fatal(err)
	}
	one, err := b.Edits.ForDevice(cdi.Device{Name: "gpu-1", UUID: gpu.UUID, Minor: gpu.Minor})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for _, e := range []cdispec.ContainerEdits{common, one} {
		for _, n := range e.DeviceNodes {
			nodes[n.Path] = n.HostPath
		}
	}
	for _, p := range []string{"/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"} {
		if want := filepath.Join(dev, strings.TrimPrefix(p, "/dev/")); nodes[p] != want {
			t.Errorf("device node %s from %q, want the simulator's %s", p, nodes[p], want)
		}
	}
	if _, ok := nodes["/dev/nvidia0"]; ok {
		t.Error("GPU 1's edits hold /dev/nvidia0")
	}
	libs := map[string]string{}
	for _, m := range common.Mounts {
		libs[filepath.Base(m.ContainerPath)] = m.HostPath
	}
	for _, l := range []string{"libcuda.so.535.261.03", "libnvidia-ml.so.535.261.03"} {
		if !strings.HasPrefix(libs[l], hostRoot+"/") {
			t.Errorf("%s mounted from %q, want the host's driver root %s", l, libs[l], hostRoot)
		}
	}
	hooks := ""
	for _, h := range common.Hooks {
		if h.Path != filepath.Join(hookDir, cdi.HookName) {
			t.Errorf("hook %s, want the installed %s", h.Path, filepath.Join(hookDir, cdi.HookName))
		}
		hooks += strings.Join(h.Args, " ") + "\n"
	}
	for _, want := range []string{"create-symlinks", "update-ldcache"} {
		if !strings.Contains(hooks, want) {
			t.Errorf("no %s hook in:\n%s", want, hooks)
		}
	}

	// A MIG device on GPU 1: its capability nodes exist while it does.
	if err := sim.SetMigModeAsAdmin(gpu.UUID, nvml.DEVICE_MIG_ENABLE); err != nil {
		t.Fatal(err)
	}
	h, _ := sim.DeviceGetHandleByUUID(gpu.UUID)
	info, ret := h.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	gi, ret := h.CreateGpuInstance(&info)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	ci, ret := gi.CreateComputeInstance(&ciInfo)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	mig, _ := h.GetMigDeviceHandleByIndex(0)
	migUUID, _ := mig.GetUUID()
	giInfo, _ := gi.GetInfo()
	caps := []int{simulate.GICapMinor(gpu.Minor, int(giInfo.Id)), simulate.CICapMinor(gpu.Minor, int(giInfo.Id), 0)}
	edits, err := b.Edits.ForDevice(cdi.Device{Name: "mig", UUID: migUUID, Minor: gpu.Minor, ParentUUID: gpu.UUID})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		path := sim.CapDeviceNodePath(c)
		if ma, mi := charDev(t, path); ma != simulate.CapsMajor || int(mi) != c {
			t.Errorf("%s is %d:%d", path, ma, mi)
		}
		found := false
		for _, n := range edits.DeviceNodes {
			found = found || (n.Path == "/dev/nvidia-caps/"+filepath.Base(path) && n.Major == simulate.CapsMajor && n.Minor == int64(c))
		}
		if !found {
			t.Errorf("MIG edits lack %s", filepath.Base(path))
		}
	}
	if ret := ci.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	for _, c := range caps {
		if _, err := os.Lstat(sim.CapDeviceNodePath(c)); !os.IsNotExist(err) {
			t.Errorf("capability node %d outlives its MIG instance: %v", c, err)
		}
	}
	if err := sim.RemoveDeviceNodes(); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownNodeModeIsRefused(t *testing.T) {
	if _, err := Open(Options{SimulateProfile: "h100x1", SimulateNodeMode: "gpu", NodeName: "n", StateDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "devices") {
		t.Errorf("node mode gpu: %v, want an error naming the modes", err)
	}
}
