// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Simulator is a simulated node: an nvml.Interface plus the files that real
// hardware would have (device nodes, sysfs PCI topology, the MIG
// capabilities in procfs).
type Simulator struct {
	*server.Server
	Profile Profile
	// Dir holds everything the simulator writes.
	Dir string

	mig    *migSim
	events *eventHub
	xids   *xidFaults
	// noFaultsAt is when the faults directory was last found missing.
	noFaultsAt atomic.Int64
	// bootID is the node's boot ID (boot.go), a string; MIG device UUIDs
	// derive from it once the node was rebooted (rebooted).
	bootID   atomic.Value
	rebooted atomic.Bool
	// devNodes: MakeDeviceNodes was called (devnodes.go).
	devNodes atomic.Bool
	// pci holds each GPU's driver binding (sysfs.go).
	pci *pciState
}

// GPUsPerPCIeRoot is how many simulated GPUs share a PCIe root complex; two
// per root, as on DGX-class boards, so that topology-aware claims can be tried.
const GPUsPerPCIeRoot = 2

// GPUsPerNUMANode places the first half of an 8-GPU node on NUMA node 0.
const GPUsPerNUMANode = 4

// New builds a simulated node. GPU identities derive from the profile name
// and node name only, so a restarted plugin sees the same devices; MIG
// device UUIDs also from the boot ID, which New keeps (see Reboot).
func New(profile Profile, nodeName, dir string) (*Simulator, error) {
	profile, err := completeProfile(profile)
	if err != nil {
		return nil, err
	}
	configs := make([]gpus.Config, profile.Count)
	for i := range configs {
		configs[i] = profile.GPU
	}
	srv := server.NewServerWithGPUs(DriverVersion, NVMLVersion, CudaDriverVersion, configs...)
	sim := &Simulator{Server: srv, Profile: profile, Dir: dir, pci: &pciState{driver: map[string]string{}}}
	sim.wireSymbols() // addressing.go
	if err := sim.loadBootID(); err != nil {
		return nil, err
	}
	var minors []int
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.UUID = stableUUID("GPU", profile.Name, nodeName, fmt.Sprint(dev.Index))
		dev.PciBusID = PCIBusID(dev.Index)
		sim.wireDevice(dev)
		minors = append(minors, dev.Minor)
	}
	if err := sim.writeHostFiles(); err != nil {
		return nil, err
	}
	if err := sim.writeProcFiles(minors); err != nil {
		return nil, fmt.Errorf("simulated procfs: %w", err)
	}
	sim.wireEvents()
	sim.wirePCI() // before wireMig, whose UUID lookup falls back to it
	if err := sim.wireMig(); err != nil {
		return nil, err
	}
	return sim, nil
}

// completeProfile fills in a Profile built by hand rather than by
// ParseProfile.
func completeProfile(profile Profile) (Profile, error) {
	if profile.hw.cores != 0 {
		return profile, nil
	}
	p, err := ParseProfile(fmt.Sprintf("%sx%d", profile.Model, profile.Count))
	if err != nil {
		return Profile{}, err
	}
	p.MigEnabled = profile.MigEnabled
	return p, nil
}

// stableUUID derives a UUID-formatted identifier from its parts.
func stableUUID(prefix string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	s := h.Sum(nil)
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// PCIBusID returns the sysfs-style bus ID of simulated GPU i.
func PCIBusID(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x18+i*8) }

// PCIeRoot returns the root complex of simulated GPU i.
func PCIeRoot(i int) string { return fmt.Sprintf("pci0000:%02x", 0x10+(i/GPUsPerPCIeRoot)*0x20) }

// wireDevice fills in what go-nvml's mock leaves unwired or too thin, and
// makes the GPU's queries fail while a fault is injected (faults.go).
func (s *Simulator) wireDevice(dev *server.Device) {
	hw := s.Profile.hw
	fault := func() nvml.Return { return s.fault(dev.UUID) }
	dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return nvml.PciInfo{}, r
		}
		info := nvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId}
		// NVML reports an 8-digit domain in upper case.
		copyCString(info.BusId[:], "0000"+strings.ToUpper(dev.PciBusID))
		copyCString(info.BusIdLegacy[:], strings.ToUpper(dev.PciBusID))
		return info, nvml.SUCCESS
	}
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return nvml.Memory{}, r
		}
		return nvml.Memory{Total: dev.MemoryInfo.Total, Free: dev.MemoryInfo.Total}, nvml.SUCCESS
	}
	dev.GetNameFunc = func() (string, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return "", r
		}
		return dev.Config.Name, nvml.SUCCESS
	}
	dev.GetBrandFunc = func() (nvml.BrandType, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return 0, r
		}
		return dev.Config.Brand, nvml.SUCCESS
	}
	dev.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return 0, r
		}
		return dev.Config.Architecture, nvml.SUCCESS
	}
	dev.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return 0, 0, r
		}
		return dev.Config.CudaMajor, dev.Config.CudaMinor, nvml.SUCCESS
	}
	// The CUDA core count; NVML does not answer it while MIG mode is on.
	dev.GetNumGpuCoresFunc = func() (int, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return 0, r
		}
		if s.mig != nil && s.mig.currentMode(dev) == nvml.DEVICE_MIG_ENABLE {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return hw.cores, nvml.SUCCESS
	}
	// nvmlDeviceGetAttributes_v2 "currently only supports MIG device
	// handles" (NVML API reference).
	dev.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		if r := fault(); r != nvml.SUCCESS {
			return nvml.DeviceAttributes{}, r
		}
		return nvml.DeviceAttributes{}, nvml.ERROR_NOT_SUPPORTED
	}
	dev.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	s.wireProcesses(dev)
	s.wireAddressingMode(dev)
}

// SMs is the number of SMs of a simulated GPU.
func (s *Simulator) SMs() int { return s.Profile.hw.sms }

// DevicePath is the simulated /dev/nvidiaN of GPU minor.
func (s *Simulator) DevicePath(minor int) string {
	return filepath.Join(s.Dir, "dev", fmt.Sprintf("nvidia%d", minor))
}

// ControlDevicePath is the simulated /dev/nvidiactl.
func (s *Simulator) ControlDevicePath() string { return filepath.Join(s.Dir, "dev", "nvidiactl") }

// SysfsRoot is the simulated /sys.
func (s *Simulator) SysfsRoot() string { return filepath.Join(s.Dir, "sys") }

// writeHostFiles creates the simulated device files and sysfs topology.
// Each device file holds "<uuid>\t<product name>", which the nvidia-smi
// stand-in prints inside a container.
func (s *Simulator) writeHostFiles() error {
	if err := os.MkdirAll(filepath.Join(s.Dir, "dev"), 0o755); err != nil {
		return fmt.Errorf("create simulated device dir: %w", err)
	}
	if err := writeIfChanged(s.ControlDevicePath(), []byte("simulated nvidiactl\n")); err != nil {
		return err
	}
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		line := fmt.Sprintf("%s\t%s\n", dev.UUID, dev.Config.Name)
		if err := writeIfChanged(s.DevicePath(dev.Minor), []byte(line)); err != nil {
			return err
		}
		if err := s.writeSysfs(dev.Index, dev.PciBusID); err != nil {
			return err
		}
	}
	return nil
}

func (s *Simulator) writeSysfs(index int, busID string) error {
	root := s.SysfsRoot()
	devDir := filepath.Join(root, "devices", PCIeRoot(index), fmt.Sprintf("0000:%02x:01.0", 0x10+(index/GPUsPerPCIeRoot)*0x20), busID)
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return fmt.Errorf("create simulated sysfs: %w", err)
	}
	if err := writeIfChanged(filepath.Join(devDir, "numa_node"), []byte(fmt.Sprintf("%d\n", index/GPUsPerNUMANode))); err != nil {
		return err
	}
	linkDir := filepath.Join(root, "bus", "pci", "devices")
	if err := os.MkdirAll(linkDir, 0o755); err != nil {
		return fmt.Errorf("create simulated sysfs: %w", err)
	}
	rel, err := filepath.Rel(linkDir, devDir)
	if err != nil {
		return err
	}
	if err := symlinkIfChanged(rel, filepath.Join(linkDir, busID)); err != nil {
		return err
	}
	return s.writePCIBinding(index, busID, devDir)
}

func writeIfChanged(path string, data []byte) error {
	if cur, err := os.ReadFile(path); err == nil && string(cur) == string(data) {
		return nil
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write simulated file: %w", err)
	}
	return nil
}

func copyCString(dst []int8, s string) {
	for i := 0; i < len(s) && i < len(dst)-1; i++ {
		dst[i] = int8(s[i])
	}
}

// SetTimeSlice records a compute-policy time slice, as nvidia-smi
// compute-policy --set-timeslice would set it on real hardware.
func (s *Simulator) SetTimeSlice(uuid string, interval configapi.TimeSliceInterval) error {
	p := filepath.Join(s.computePolicyDir(), uuid)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(interval), 0o644)
}

// computePolicyDir holds the time slice of each GPU whose slice was set.
func (s *Simulator) computePolicyDir() string { return filepath.Join(s.Dir, "compute-policy") }

// TimeSlice returns the recorded time slice of a GPU ("Default" if never set).
func (s *Simulator) TimeSlice(uuid string) string {
	data, err := os.ReadFile(filepath.Join(s.computePolicyDir(), uuid))
	if err != nil {
		return string(configapi.DefaultTimeSlice)
	}
	return string(data)
}

// Discover builds a simulated node from a profile name and discovers it as
// the plugin discovers real GPUs.
func Discover(profile, nodeName, dir string) (*Simulator, *nvdev.Inventory, error) {
	p, err := ParseProfile(profile)
	if err != nil {
		return nil, nil, err
	}
	sim, err := New(p, nodeName, dir)
	if err != nil {
		return nil, nil, err
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		return nil, nil, fmt.Errorf("discover simulated GPUs: %w", err)
	}
	return sim, inv, nil
}
