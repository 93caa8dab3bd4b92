package simulate

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Simulator is a simulated node: an nvml.Interface plus the files that real
// hardware would have (device nodes, sysfs PCI topology).
type Simulator struct {
	*server.Server
	Profile Profile
	// Dir holds everything the simulator writes.
	Dir string
}

// GPUsPerPCIeRoot is how many simulated GPUs share a PCIe root complex; two
// per root, as on DGX-class boards, so that topology-aware claims can be tried.
const GPUsPerPCIeRoot = 2

// GPUsPerNUMANode places the first half of an 8-GPU node on NUMA node 0.
const GPUsPerNUMANode = 4

// New builds a simulated node. Identities derive from the profile name and
// node name only, so a restarted plugin sees the same devices.
func New(profile Profile, nodeName, dir string) (*Simulator, error) {
	configs := make([]gpus.Config, profile.Count)
	for i := range configs {
		configs[i] = profile.GPU
	}
	srv := server.NewServerWithGPUs(DriverVersion, NVMLVersion, CudaDriverVersion, configs...)
	sim := &Simulator{Server: srv, Profile: profile, Dir: dir}
	for _, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.UUID = StableUUID("GPU", profile.Name, nodeName, fmt.Sprint(dev.Index))
		dev.PciBusID = PCIBusID(dev.Index)
		sim.wireDevice(dev)
	}
	if err := sim.writeHostFiles(); err != nil {
		return nil, err
	}
	if err := sim.wireMig(); err != nil {
		return nil, err
	}
	return sim, nil
}

// StableUUID derives a UUID-formatted identifier from its parts.
func StableUUID(prefix string, parts ...string) string {
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

// wireDevice fills in what go-nvml's mock leaves unwired or too thin.
func (s *Simulator) wireDevice(dev *server.Device) {
	dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		info := nvml.PciInfo{PciDeviceId: dev.Config.PciDeviceId}
		// NVML reports an 8-digit domain in upper case.
		copyCString(info.BusId[:], "0000"+upper(dev.PciBusID))
		copyCString(info.BusIdLegacy[:], upper(dev.PciBusID))
		return info, nvml.SUCCESS
	}
	baseMemory := dev.GetMemoryInfoFunc
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if s.IsLost(dev.UUID) {
			return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
		}
		return baseMemory()
	}
}

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
	link := filepath.Join(linkDir, busID)
	if cur, err := os.Readlink(link); err == nil && cur == rel {
		return nil
	}
	_ = os.Remove(link)
	if err := os.Symlink(rel, link); err != nil {
		return fmt.Errorf("create simulated sysfs link: %w", err)
	}
	return nil
}

func (s *Simulator) faultPath(uuid string) string {
	return filepath.Join(s.Dir, "faults", uuid+".lost")
}

// SetLost injects (or clears) a "GPU is lost" failure: NVML calls on that
// GPU then fail as they do when a real GPU falls off the bus. The marker is
// a file so that an operator can inject it into a running plugin too.
func (s *Simulator) SetLost(uuid string, lost bool) error {
	p := s.faultPath(uuid)
	if !lost {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, nil, 0o644)
}

// IsLost reports whether a lost-GPU failure is injected.
func (s *Simulator) IsLost(uuid string) bool {
	_, err := os.Stat(s.faultPath(uuid))
	return err == nil
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

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// SetTimeSlice records a compute-policy time slice, as nvidia-smi
// compute-policy --set-timeslice would set it on real hardware.
func (s *Simulator) SetTimeSlice(uuid string, interval configapi.TimeSliceInterval) error {
	p := filepath.Join(s.Dir, "compute-policy", uuid)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(interval), 0o644)
}

// TimeSlice returns the recorded time slice of a GPU ("Default" if never set).
func (s *Simulator) TimeSlice(uuid string) string {
	data, err := os.ReadFile(filepath.Join(s.Dir, "compute-policy", uuid))
	if err != nil {
		return string(configapi.DefaultTimeSlice)
	}
	return string(data)
}

// Discover builds a simulated node from a profile name and discovers it as
// the plugin does; simulated GPUs switch MIG mode without a reset.
func Discover(profile, nodeName, dir string) (*Simulator, *nvdev.Inventory, error) {
	p, err := ParseProfile(profile)
	if err != nil {
		return nil, nil, err
	}
	sim, err := New(p, nodeName, dir)
	if err != nil {
		return nil, nil, err
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot(), MigModeChangeWithoutReset: true})
	if err != nil {
		return nil, nil, fmt.Errorf("discover simulated GPUs: %w", err)
	}
	return sim, inv, nil
}
