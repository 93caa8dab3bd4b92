// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// The simulated sysfs keeps, per GPU, what the kernel shows of a PCI
// device's binding (Documentation/ABI/testing/sysfs-bus-pci):
//
//	sys/bus/pci/devices/<addr>/driver           link to bus/pci/drivers/<drv>
//	sys/bus/pci/devices/<addr>/driver_override  "(null)" or a driver name
//	sys/bus/pci/devices/<addr>/iommu_group      link to kernel/iommu_groups/<n>
//	sys/kernel/iommu_groups/<n>/devices/        the GPU and its audio function
//	sys/bus/pci/drivers/{nvidia,vfio-pci}/{bind,unbind}
//
// Writes go through Simulator.WriteSysfs, which does what the kernel does
// on that write: unbind drops the driver link, bind makes it (refused with
// EBUSY while another driver holds the device, and with ENODEV when
// driver_override names another driver), and vfio-pci's bind creates
// dev/vfio/<group> (Documentation/driver-api/vfio.rst). A GPU that is not
// bound to nvidia is gone from NVML, as on a host: the device count and
// handle lookups skip it and queries on a handle taken before fail with
// GPU_IS_LOST; bound to nvidia again it is back with the same identity.
// The binding is kept in the tree, so it outlives a plugin restart;
// Reboot binds every GPU to nvidia again (vfio-pci binding is not
// persistent unless the host is configured so, which docs/passthrough.md
// tells operators not to do for GPUs this driver manages).

// pciState is the in-memory copy of the bindings, read on every NVML query.
type pciState struct {
	mu     sync.Mutex
	driver map[string]string // by PCI address
}

// IOMMUGroup is the IOMMU group of simulated GPU i: one per GPU, shared
// with its audio function (function 1), as on boards with ACS.
func IOMMUGroup(i int) string { return fmt.Sprint(40 + i) }

func audioFunction(addr string) string { return addr[:len(addr)-1] + "1" }

// VFIO is a vfio.Host over the simulated sysfs and /dev.
func (s *Simulator) VFIO() vfio.Host {
	return vfio.Host{SysfsRoot: s.SysfsRoot(), DevRoot: filepath.Join(s.Dir, "dev"), Write: s.WriteSysfs}
}

// writePCIBinding adds a GPU's binding files to the tree made by
// writeSysfs; devDir is the GPU's device directory.
func (s *Simulator) writePCIBinding(index int, addr, devDir string) error {
	root := s.SysfsRoot()
	group := IOMMUGroup(index)
	groupDevs := filepath.Join(root, "kernel", "iommu_groups", group, "devices")
	audioDir := filepath.Join(filepath.Dir(devDir), audioFunction(addr))
	for _, d := range []string{groupDevs, audioDir, s.driverDir(vfio.DriverNvidia), s.driverDir(vfio.DriverVFIO)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create simulated sysfs: %w", err)
		}
	}
	for _, drv := range []string{vfio.DriverNvidia, vfio.DriverVFIO} {
		for _, f := range []string{"bind", "unbind"} {
			if err := writeIfChanged(filepath.Join(s.driverDir(drv), f), nil); err != nil {
				return err
			}
		}
	}
	links := map[string]string{
		filepath.Join(devDir, "iommu_group"):          filepath.Join(root, "kernel", "iommu_groups", group),
		filepath.Join(audioDir, "iommu_group"):        filepath.Join(root, "kernel", "iommu_groups", group),
		filepath.Join(groupDevs, addr):                devDir,
		filepath.Join(groupDevs, audioFunction(addr)): audioDir,
	}
	for link, target := range links {
		if err := symlinkIfChanged(target, link); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(devDir, "driver_override")); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(filepath.Join(devDir, "driver_override"), []byte("(null)\n"), 0o644); err != nil {
			return err
		}
	}
	// A GPU seen for the first time is bound to nvidia; a known one keeps
	// the binding the tree holds.
	drv := vfio.DriverNvidia
	if cur, err := os.Readlink(filepath.Join(devDir, "driver")); err == nil {
		drv = filepath.Base(cur)
	} else if err := symlinkIfChanged(s.driverDir(drv), filepath.Join(devDir, "driver")); err != nil {
		return err
	}
	s.pci.mu.Lock()
	s.pci.driver[addr] = drv
	s.pci.mu.Unlock()
	if drv == vfio.DriverVFIO {
		return s.makeGroupNode(group)
	}
	return nil
}

func (s *Simulator) driverDir(drv string) string {
	return filepath.Join(s.SysfsRoot(), "bus", "pci", "drivers", drv)
}

// symlinkIfChanged makes link point at target, relative as the kernel's
// links are, so that the tree reads the same wherever it is mounted.
func symlinkIfChanged(target, link string) error {
	if filepath.IsAbs(target) {
		rel, err := filepath.Rel(filepath.Dir(link), target)
		if err != nil {
			return err
		}
		target = rel
	}
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	_ = os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("create simulated sysfs link: %w", err)
	}
	return nil
}

// BoundDriver is the driver simulated GPU addr is bound to.
func (s *Simulator) BoundDriver(addr string) string {
	s.pci.mu.Lock()
	defer s.pci.mu.Unlock()
	return s.pci.driver[addr]
}

// offNvidia reports whether the GPU with uuid is bound to another driver
// than nvidia (or none): NVML does not see it then.
//
// A GPU bound to no driver at all (between the unbind and the bind of a
// rebind) is off nvidia too: NVML reaches GPUs only through nvidia.ko,
// which enumerates the devices it is bound to (NVML reference,
// nvmlDeviceGetCount: "the number of compute devices in the system" that
// the driver manages). Addresses the simulated sysfs does not know (no
// PCI wiring) are on nvidia.
func (s *Simulator) offNvidia(dev *server.Device) bool {
	s.pci.mu.Lock()
	d, known := s.pci.driver[dev.PciBusID]
	s.pci.mu.Unlock()
	return known && d != vfio.DriverNvidia
}

// WriteSysfs writes one attribute of the simulated sysfs and does what the
// kernel does on that write.
func (s *Simulator) WriteSysfs(path, value string) error {
	if d := s.sysfsDelay(); d > 0 {
		time.Sleep(d) // a slow kernel, so that chaos kills land mid-bind
	}
	rel, err := filepath.Rel(s.SysfsRoot(), path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("%s is outside the simulated sysfs", path)
	}
	parts := strings.Split(rel, string(filepath.Separator))
	arg := strings.TrimSpace(value)
	switch {
	case len(parts) == 5 && parts[0] == "bus" && parts[3] != "" && parts[1] == "pci" && parts[2] == "devices" && parts[4] == "driver_override":
		if _, err := os.Stat(filepath.Dir(path)); err != nil {
			return err
		}
		if arg == "" {
			arg = "(null)"
		}
		return os.WriteFile(path, []byte(arg+"\n"), 0o644)
	case len(parts) == 5 && parts[0] == "bus" && parts[1] == "pci" && parts[2] == "drivers" && (parts[4] == "bind" || parts[4] == "unbind"):
		return s.bindWrite(parts[3], parts[4] == "bind", arg)
	}
	return fmt.Errorf("%s: %w", path, syscall.EACCES)
}

func (s *Simulator) bindWrite(drv string, bind bool, addr string) error {
	devDir := filepath.Join(s.SysfsRoot(), "bus", "pci", "devices", addr)
	if _, err := os.Stat(devDir); err != nil || (drv != vfio.DriverNvidia && drv != vfio.DriverVFIO) {
		return syscall.ENODEV
	}
	s.pci.mu.Lock()
	defer s.pci.mu.Unlock()
	cur := s.pci.driver[addr]
	index := -1
	for _, d := range s.Devices {
		if dev := d.(*server.Device); dev.PciBusID == addr {
			index = dev.Index
		}
	}
	if index < 0 {
		return syscall.ENODEV
	}
	if !bind {
		if cur != drv {
			return syscall.ENODEV
		}
		if err := os.Remove(filepath.Join(devDir, "driver")); err != nil {
			return err
		}
		s.pci.driver[addr] = ""
		if drv == vfio.DriverVFIO {
			_ = os.Remove(filepath.Join(s.Dir, "dev", "vfio", IOMMUGroup(index)))
		}
		return nil
	}
	if cur != "" {
		return syscall.EBUSY
	}
	override, _ := os.ReadFile(filepath.Join(devDir, "driver_override"))
	if o := strings.TrimSpace(string(override)); o != "(null)" && o != "" && o != drv {
		return syscall.ENODEV
	}
	if err := symlinkIfChanged(s.driverDir(drv), filepath.Join(devDir, "driver")); err != nil {
		return err
	}
	s.pci.driver[addr] = drv
	if drv == vfio.DriverVFIO {
		return s.makeGroupNode(IOMMUGroup(index))
	}
	return nil
}

// makeGroupNode makes dev/vfio/<group> and dev/vfio/vfio, stand-ins (plain
// files) for the character devices udev creates.
func (s *Simulator) makeGroupNode(group string) error {
	dir := filepath.Join(s.Dir, "dev", "vfio")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeIfChanged(filepath.Join(dir, "vfio"), []byte("simulated vfio container\n")); err != nil {
		return err
	}
	return writeIfChanged(filepath.Join(dir, group), []byte("simulated vfio group "+group+"\n"))
}

// rebindAll binds every GPU to nvidia again, as a boot does.
func (s *Simulator) rebindAll() error {
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		devDir := filepath.Join(s.SysfsRoot(), "bus", "pci", "devices", dev.PciBusID)
		if err := os.WriteFile(filepath.Join(devDir, "driver_override"), []byte("(null)\n"), 0o644); err != nil {
			return err
		}
		if err := symlinkIfChanged(s.driverDir(vfio.DriverNvidia), filepath.Join(devDir, "driver")); err != nil {
			return err
		}
		s.pci.mu.Lock()
		s.pci.driver[dev.PciBusID] = vfio.DriverNvidia
		s.pci.mu.Unlock()
	}
	return os.RemoveAll(filepath.Join(s.Dir, "dev", "vfio"))
}

// wirePCI makes NVML's device list follow the bindings.
func (s *Simulator) wirePCI() {
	visible := func() []nvml.Device {
		var out []nvml.Device
		for _, d := range s.Devices {
			if !s.offNvidia(d.(*server.Device)) {
				out = append(out, d)
			}
		}
		return out
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(visible()), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		v := visible()
		if i < 0 || i >= len(v) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return v[i], nvml.SUCCESS
	}
	byUUID := s.DeviceGetHandleByUUIDFunc
	s.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		d, ret := byUUID(uuid)
		if ret == nvml.SUCCESS {
			if dev, ok := d.(*server.Device); ok && s.offNvidia(dev) {
				return nil, nvml.ERROR_NOT_FOUND
			}
		}
		return d, ret
	}
	byBus := s.DeviceGetHandleByPciBusIdFunc
	s.DeviceGetHandleByPciBusIdFunc = func(bus string) (nvml.Device, nvml.Return) {
		d, ret := byBus(bus)
		if ret == nvml.SUCCESS && s.offNvidia(d.(*server.Device)) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return d, ret
	}
}

// unboundUUID reports whether the GPU with uuid is off nvidia.
func (s *Simulator) unboundUUID(uuid string) bool {
	if s.pci == nil {
		return false
	}
	for _, d := range s.Devices {
		if dev := d.(*server.Device); dev.UUID == uuid {
			return s.offNvidia(dev)
		}
	}
	return false
}

// SimulatedPID is the process another client runs on a GPU marked in use
// (faults.go): passthrough refuses a GPU that a process uses.
const SimulatedPID = 4242

// wireProcesses lists the processes on a GPU: none, or SimulatedPID while
// another client holds it.
func (s *Simulator) wireProcesses(dev *server.Device) {
	list := func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := s.fault(dev.UUID); r != nvml.SUCCESS {
			return nil, r
		}
		if s.inUse(dev.UUID) {
			return []nvml.ProcessInfo{{Pid: SimulatedPID, UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
		}
		return nil, nvml.SUCCESS
	}
	dev.GetComputeRunningProcessesFunc = list
	dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		if r := s.fault(dev.UUID); r != nvml.SUCCESS {
			return nil, r
		}
		return nil, nvml.SUCCESS
	}
}

// SetSysfsDelay makes every simulated sysfs write take d (0 clears it):
// binding a real GPU takes a while, and tests that kill the plugin at
// random need the bind to be long enough to be hit.
func (s *Simulator) SetSysfsDelay(d time.Duration) error {
	return s.setMarker(filepath.Join(s.faultsDir(), "sysfs-delay-ms"), d > 0, []byte(strconv.FormatInt(d.Milliseconds(), 10)))
}

func (s *Simulator) sysfsDelay() time.Duration {
	if !s.anyFaults() {
		return 0
	}
	data, err := os.ReadFile(filepath.Join(s.faultsDir(), "sysfs-delay-ms"))
	if err != nil {
		return 0
	}
	ms, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return time.Duration(ms) * time.Millisecond
}
