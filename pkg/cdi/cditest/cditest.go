// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cditest builds what nvcdi reads on a real node, for tests that
// run NVIDIA's nvcdi for real without a GPU: a driver root with versioned
// libraries, binaries and character device nodes, a procfs tree with MIG
// capability files, and go-nvml's mock GPU server wired for nvcdi.
package cditest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"golang.org/x/sys/unix"
)

// LibDir is where the fake driver's libraries live, as on Debian/Ubuntu.
const LibDir = "usr/lib/x86_64-linux-gnu"

// Libraries a driver installs with its version as suffix.
var Libraries = []string{"libnvidia-ml.so", "libcuda.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so"}

// Binaries a driver installs under /usr/bin.
var Binaries = []string{"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}

// CapsMajor is the nvidia-caps major in the fake /proc/devices.
const CapsMajor = 508

// DriverRoot is a fake driver installation.
type DriverRoot struct {
	// Dir is the driver root: usr/, dev/ (unless without dev).
	Dir string
	// Proc is a procfs stand-in: devices, driver/nvidia/capabilities.
	Proc    string
	Version string
	GPUs    int
}

// NewDriverRoot lays out a driver of the given version for n GPUs under a
// temporary directory. Device nodes are real character devices (major 195,
// as the NVIDIA driver's; mode 0600, root only), so the test is skipped
// where mknod is not permitted. withDev false leaves out /dev, as in a
// containerized driver's root.
func NewDriverRoot(t testing.TB, version string, n int, withDev bool) *DriverRoot {
	t.Helper()
	base := t.TempDir()
	r := &DriverRoot{Dir: filepath.Join(base, "driver"), Proc: filepath.Join(base, "proc"), GPUs: n}
	r.Install(t, version)
	for _, b := range Binaries {
		write(t, filepath.Join(r.Dir, "usr/bin", b), "#!/bin/sh\n", 0o755)
	}
	if withDev {
		r.MakeDevices(t, filepath.Join(r.Dir, "dev"))
	}
	write(t, filepath.Join(r.Proc, "devices"), fmt.Sprintf("Character devices:\n  1 mem\n195 nvidia-frontend\n%d nvidia-caps\n511 nvidia-uvm\n\nBlock devices:\n  8 sd\n", CapsMajor), 0o644)
	return r
}

// Install puts the libraries of a driver version in place, replacing any
// other version's, as a driver upgrade does.
func (r *DriverRoot) Install(t testing.TB, version string) {
	t.Helper()
	dir := filepath.Join(r.Dir, LibDir)
	if r.Version != "" {
		for _, l := range Libraries {
			for _, p := range []string{l + "." + r.Version, l + ".1"} {
				if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
		}
	}
	for _, l := range Libraries {
		write(t, filepath.Join(dir, l+"."+version), "ELF stand-in\n", 0o644)
		if err := os.Symlink(l+"."+version, filepath.Join(dir, l+".1")); err != nil {
			t.Fatal(err)
		}
	}
	r.Version = version
}

// MakeDevices creates the driver's device nodes in dir: nvidia0..N-1 and
// the control devices.
func (r *DriverRoot) MakeDevices(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]uint32{"nvidiactl": 255, "nvidia-modeset": 254}
	for i := 0; i < r.GPUs; i++ {
		nodes[fmt.Sprintf("nvidia%d", i)] = uint32(i)
	}
	for name, minor := range nodes {
		mknod(t, filepath.Join(dir, name), 195, minor)
	}
	mknod(t, filepath.Join(dir, "nvidia-uvm"), 511, 0)
	mknod(t, filepath.Join(dir, "nvidia-uvm-tools"), 511, 1)
}

// AddMigCaps writes the capability files of a MIG device (GPU instance gi,
// compute instance ci on GPU gpuMinor) as the kernel driver shows them.
func (r *DriverRoot) AddMigCaps(t testing.TB, gpuMinor, gi, ci, giCapMinor, ciCapMinor int) {
	t.Helper()
	dir := filepath.Join(r.Proc, "driver/nvidia/capabilities", fmt.Sprintf("gpu%d", gpuMinor), "mig", fmt.Sprintf("gi%d", gi))
	write(t, filepath.Join(dir, "access"), capability(giCapMinor), 0o444)
	write(t, filepath.Join(dir, fmt.Sprintf("ci%d", ci), "access"), capability(ciCapMinor), 0o444)
}

// capability is a capability file's body; mode 292 is 0444, copied from a
// MIG-enabled node.
func capability(minor int) string {
	return fmt.Sprintf("DeviceFileMinor: %d\nDeviceFileMode: 292\nDeviceFileModify: 1\n", minor)
}

func write(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func mknod(t testing.TB, path string, major, minor uint32) {
	t.Helper()
	err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(major, minor)))
	if errors.Is(err, unix.EPERM) {
		t.Skipf("creating device nodes needs CAP_MKNOD (run as root): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// NVML is go-nvml's mock GPU server with what nvcdi asks of it wired, and
// MIG device handles that can be added by UUID.
type NVML struct {
	*server.Server
	migs map[string]*mock.Device
	// VersionErr, when set, is returned instead of the driver version.
	VersionErr nvml.Return
}

// NewNVML returns n H100s reporting the given driver version.
func NewNVML(version string, n int) *NVML {
	s := dgxh100.NewWithGPUs(gpus.Multiple(n, gpus.H100_SXM5_80GB)...)
	s.DriverVersion = version
	l := &NVML{Server: s, migs: map[string]*mock.Device{}}
	for i, d := range s.Devices {
		WireDevice(d.(*server.Device), fmt.Sprintf("0000:%02x:00.0", 0x18+8*i))
	}
	s.SystemGetDriverVersionFunc = func() (string, nvml.Return) {
		if l.VersionErr != nvml.SUCCESS {
			return "", l.VersionErr
		}
		return s.DriverVersion, nvml.SUCCESS
	}
	gpuByUUID := s.DeviceGetHandleByUUIDFunc
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		if m, ok := l.migs[uuid]; ok {
			return m, nvml.SUCCESS
		}
		return gpuByUUID(uuid)
	}
	return l
}

// WireDevice adds what nvcdi calls on a whole GPU that the mock server
// leaves unwired, and a PCI bus ID.
func WireDevice(d *server.Device, busID string) {
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	d.PciBusID = busID
	info, _ := d.GetPciInfo()
	copy(info.BusId[:], toInt8(busID))
	copy(info.BusIdLegacy[:], toInt8(busID))
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) { return info, nvml.SUCCESS }
}

func toInt8(s string) []int8 {
	out := make([]int8, len(s))
	for i := range s {
		out[i] = int8(s[i])
	}
	return out
}

// UUID returns the UUID of GPU i.
func (l *NVML) UUID(i int) string { return l.Devices[i].(*server.Device).UUID }

// AddMig creates a 1g GPU instance and its compute instance on GPU
// parent through the mock (MIG mode on), and a MIG device handle for them
// known by uuid, wired as far as nvcdi and go-nvlib ask. It returns the
// instance IDs, which a real driver would pick the same way.
func (l *NVML) AddMig(parent int, uuid string) (gi, ci int) {
	p := l.Devices[parent].(*server.Device)
	p.MigMode = nvml.DEVICE_MIG_ENABLE
	giProfile, ret := p.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if ret != nvml.SUCCESS {
		panic(ret)
	}
	giHandle, _ := p.CreateGpuInstance(&giProfile)
	ciProfile, ret := giHandle.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		panic(ret)
	}
	ciHandle, _ := giHandle.CreateComputeInstance(&ciProfile)
	giInfo, _ := giHandle.GetInfo()
	ciInfo, _ := ciHandle.GetInfo()
	gi, ci = int(giInfo.Id), int(ciInfo.Id)

	p.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		p.RLock()
		defer p.RUnlock()
		for g := range p.GpuInstances {
			if int(g.Info.Id) == id {
				return g, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	g := giHandle.(*server.GpuInstance)
	g.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		g.RLock()
		defer g.RUnlock()
		for c := range g.ComputeInstances {
			if int(c.Info.Id) == id {
				return c, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	index := len(l.migs)
	l.migs[uuid] = &mock.Device{
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetUUIDFunc:                            func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetIndexFunc:                           func() (int, nvml.Return) { return index, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return ci, nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return p, nvml.SUCCESS },
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			return nvml.DeviceAttributes{
				MultiprocessorCount:       ciProfile.MultiprocessorCount,
				GpuInstanceSliceCount:     giProfile.SliceCount,
				ComputeInstanceSliceCount: ciProfile.SliceCount,
				MemorySizeMB:              giProfile.MemorySizeMB,
			}, nvml.SUCCESS
		},
	}
	return gi, ci
}

// HookSubcommands are the nvidia-cdi-hook subcommands of the pinned
// nvidia-container-toolkit (v1.20.1).
var HookSubcommands = []string{"update-ldcache", "create-symlinks", "chmod", "enable-cuda-compat", "disable-device-node-modification", "apply-cuda-memory-limits", "update-application-profile"}

// WriteHookStandIn writes a shell script standing in for nvidia-cdi-hook.
// Like the real one (v1.20.1), it prints a help page for `<subcommand>
// --help` when it knows the subcommand, and for one it does not know only
// warns "Unsupported CDI hook" and exits 0.
func WriteHookStandIn(t testing.TB, path string, subcommands []string) {
	t.Helper()
	sorted := append([]string(nil), subcommands...)
	sort.Strings(sorted)
	script := "#!/bin/sh\n# nvidia-cdi-hook stand-in\ncase \"$1\" in\n  " + strings.Join(sorted, "|") +
		") printf 'NAME:\\n   NVIDIA CDI Hook %s - stand-in\\n' \"$1\"; exit 0 ;;\n" +
		"  --version) echo 'NVIDIA CDI Hook version stand-in'; exit 0 ;;\nesac\n" +
		"echo \"level=warning msg=\\\"Unsupported CDI hook: $1\\\"\" >&2\nexit 0\n"
	write(t, path, script, 0o755)
}
