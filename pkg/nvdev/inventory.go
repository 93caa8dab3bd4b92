// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nvdev discovers NVIDIA GPUs through an nvml.Interface. It knows
// nothing about Kubernetes: it turns NVML answers (real or simulated) into a
// plain Inventory that other packages publish and prepare.
package nvdev

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/klog/v2"
)

// GPU describes one physical GPU as NVML reports it.
type GPU struct {
	Index                 int
	Minor                 int
	UUID                  string
	ProductName           string
	Brand                 string
	Architecture          string
	CudaComputeCapability string // semver, e.g. "9.0.0"
	MemoryBytes           uint64
	// Multiprocessors is the GPU's SM count; 0 when NVML cannot tell (it
	// does not answer while MIG mode is on).
	Multiprocessors int

	PCIBusID string // sysfs form, e.g. "0000:3b:00.0"
	PCIeRoot string // e.g. "pci0000:30"; empty when sysfs has no answer
	NUMANode *int
	// IOMMUGroup is the GPU's IOMMU group (sysfs iommu_group); empty when
	// the IOMMU is off. Passthrough needs it (pkg/vfio).
	IOMMUGroup string
	MigCapable bool
	MigEnabled bool
	// AddressingMode is how the GPU reaches system memory (addressing.go):
	// AddressingModeHMM, AddressingModeATS or AddressingModeNone; empty
	// where NVML does not tell.
	AddressingMode string
	// MigModeChangeNeedsReset is true where switching MIG mode requires a
	// GPU reset (Ampere): the plugin never changes their MIG mode, offers
	// them for dynamic MIG only when an admin has already turned MIG mode
	// on, and then never as a whole GPU.
	MigModeChangeNeedsReset bool
	MigProfiles             []MigProfile
	// MigDevices are the MIG devices that exist at discovery.
	MigDevices []MigDevice

	// Device is the NVML handle, kept for prepare-time operations.
	Device nvml.Device `json:"-"`
}

// Inventory is everything discovered on one node.
type Inventory struct {
	DriverVersion     string // semver, e.g. "550.54.15"
	CudaDriverVersion string // semver, e.g. "12.4.0"
	GPUs              []*GPU
	// Failed are the GPUs that NVML could not describe; they are left out
	// of GPUs so that the healthy ones are still published.
	Failed []FailedGPU
}

// FailedGPU is a GPU that discovery left out.
type FailedGPU struct {
	Index int
	UUID  string // empty when NVML could not tell
	Err   error
}

// Options tunes discovery.
type Options struct {
	// SysfsRoot is where PCIe topology is read from ("/sys" on a host).
	SysfsRoot string
}

// failedGPUs counts, for the life of the process, the GPUs discovery left
// out (exported as a Prometheus counter by pkg/metrics).
var failedGPUs atomic.Uint64

// FailedGPUsTotal is how many GPUs discovery has left out so far because
// NVML could not describe them.
func FailedGPUsTotal() uint64 { return failedGPUs.Load() }

// Discover enumerates every GPU. NVML must already be initialised. A GPU
// that NVML cannot describe (lost, in a bad state) is logged, counted and
// left out: one broken GPU must not take the node's other GPUs with it.
// Only node-wide failures (driver version, device count) are errors.
func Discover(lib nvml.Interface, opts Options) (*Inventory, error) {
	if opts.SysfsRoot == "" {
		opts.SysfsRoot = "/sys"
	}
	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get driver version: %s", nvml.ErrorString(ret))
	}
	cuda, ret := lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get CUDA driver version: %s", nvml.ErrorString(ret))
	}
	inv := &Inventory{
		DriverVersion:     SemverFromDotted(driver),
		CudaDriverVersion: fmt.Sprintf("%d.%d.0", cuda/1000, (cuda%1000)/10),
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get device count: %s", nvml.ErrorString(ret))
	}
	for i := 0; i < count; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			inv.fail(i, "", fmt.Errorf("get handle: %s", nvml.ErrorString(ret)))
			continue
		}
		gpu, err := describeGPU(lib, dev, opts)
		if err != nil {
			uuid, _ := dev.GetUUID()
			inv.fail(i, uuid, err)
			continue
		}
		inv.GPUs = append(inv.GPUs, gpu)
	}
	sort.Slice(inv.GPUs, func(a, b int) bool { return inv.GPUs[a].Minor < inv.GPUs[b].Minor })
	return inv, nil
}

func (inv *Inventory) fail(index int, uuid string, err error) {
	klog.ErrorS(err, "Leaving out a GPU that NVML cannot describe", "index", index, "uuid", uuid)
	failedGPUs.Add(1)
	inv.Failed = append(inv.Failed, FailedGPU{Index: index, UUID: uuid, Err: err})
}

func describeGPU(lib nvml.Interface, dev nvml.Device, opts Options) (*GPU, error) {
	g := &GPU{Device: dev}
	var ret nvml.Return
	var err error
	if g.Index, ret = dev.GetIndex(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get index: %s", nvml.ErrorString(ret))
	}
	if g.Minor, ret = dev.GetMinorNumber(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get minor number: %s", nvml.ErrorString(ret))
	}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get UUID: %s", nvml.ErrorString(ret))
	}
	if g.ProductName, ret = dev.GetName(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get name: %s", nvml.ErrorString(ret))
	}
	brand, ret := dev.GetBrand()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get brand: %s", nvml.ErrorString(ret))
	}
	g.Brand = BrandName(brand)
	arch, ret := dev.GetArchitecture()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get architecture: %s", nvml.ErrorString(ret))
	}
	g.Architecture = ArchitectureName(arch)
	major, minor, ret := dev.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get compute capability: %s", nvml.ErrorString(ret))
	}
	g.CudaComputeCapability = fmt.Sprintf("%d.%d.0", major, minor)
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get memory info: %s", nvml.ErrorString(ret))
	}
	g.MemoryBytes = mem.Total
	pci, ret := dev.GetPciInfo()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get PCI info: %s", nvml.ErrorString(ret))
	}
	g.PCIBusID = NormalizePCIBusID(cString(pci.BusId[:]))
	if g.AddressingMode, err = addressingMode(lib, dev); err != nil {
		return nil, err
	}

	current, _, ret := dev.GetMigMode()
	switch ret {
	case nvml.SUCCESS:
		g.MigCapable = true
		g.MigEnabled = current == nvml.DEVICE_MIG_ENABLE
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		return nil, fmt.Errorf("get MIG mode: %s", nvml.ErrorString(ret))
	}
	g.Multiprocessors = multiprocessors(dev, major, minor)
	if g.MigCapable {
		g.MigModeChangeNeedsReset = migModeChangeNeedsReset(arch)
		if g.MigProfiles, err = migProfiles(lib, dev, g.MemoryBytes); err != nil {
			return nil, err
		}
		if g.MigEnabled {
			if g.MigDevices, err = ExistingMigDevices(dev, g.MigProfiles); err != nil {
				return nil, err
			}
		}
	}

	if g.PCIBusID != "" {
		fsMod := deviceattribute.WithFSFromRoot(opts.SysfsRoot)
		if attr, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(g.PCIBusID, fsMod); err == nil && attr.Value.StringValue != nil {
			g.PCIeRoot = *attr.Value.StringValue
		}
		if attr, err := deviceattribute.GetNUMANodeAttributeByPCIBusID(g.PCIBusID, deviceattribute.ScalarAttribute, fsMod); err == nil && attr.Value.IntValue != nil {
			n := int(*attr.Value.IntValue)
			g.NUMANode = &n
		}
		if target, err := os.Readlink(filepath.Join(opts.SysfsRoot, "bus", "pci", "devices", g.PCIBusID, "iommu_group")); err == nil {
			g.IOMMUGroup = filepath.Base(target)
		}
	}
	return g, nil
}

// MigModeChangeNeedsReset reports whether a GPU's MIG mode only changes with
// a GPU reset: on Ampere "the driver will attempt to reset the GPU so that
// MIG mode can take effect", while "starting with the Hopper generation of
// GPUs, enabling MIG mode no longer requires a GPU reset" (NVIDIA MIG User
// Guide, getting-started-with-mig.html). A GPU whose architecture NVML
// cannot tell is treated as needing a reset: the safe side.
func MigModeChangeNeedsReset(dev nvml.Device) bool {
	arch, ret := dev.GetArchitecture()
	return ret != nvml.SUCCESS || migModeChangeNeedsReset(arch)
}

func migModeChangeNeedsReset(arch nvml.DeviceArchitecture) bool {
	return arch < nvml.DEVICE_ARCH_HOPPER || arch == nvml.DEVICE_ARCH_UNKNOWN
}

// multiprocessors returns a GPU's SM count, or 0 when NVML cannot tell.
//
// NVML has no SM query for a GPU handle: nvmlDeviceGetAttributes_v2 "currently
// only supports MIG device handles" (NVML API reference), and the full-GPU
// MIG profile counts only the SMs MIG can use (98 of an A100's 108,
// `nvidia-smi mig -lgip`). nvmlDeviceGetNumGpuCores returns the GPU's CUDA
// core count; divided by the cores per SM of its compute capability it is
// the SM count (the table is _ConvertSMVer2Cores in NVIDIA's CUDA samples,
// Common/helper_cuda.h). "On MIG-enabled GPUs, querying the device's core
// count is currently not supported" (NVML API reference): the count is then
// unknown rather than the MIG profile's.
func multiprocessors(dev nvml.Device, ccMajor, ccMinor int) int {
	cores, ret := dev.GetNumGpuCores()
	if ret != nvml.SUCCESS || cores <= 0 {
		return 0
	}
	perSM := coresPerSM(ccMajor, ccMinor)
	if perSM == 0 || cores%perSM != 0 {
		return 0
	}
	return cores / perSM
}

// coresPerSM is the number of FP32 CUDA cores per SM by compute capability
// (_ConvertSMVer2Cores, CUDA samples); 0 for capabilities it does not list.
func coresPerSM(major, minor int) int {
	switch major<<4 + minor {
	case 0x60, 0x70, 0x72, 0x75, 0x80:
		return 64
	case 0x61, 0x62, 0x86, 0x87, 0x89, 0x90, 0xa0, 0xa1, 0xa3, 0xb0, 0xc0, 0xc1:
		return 128
	}
	return 0
}

// NormalizePCIBusID turns NVML's "00000000:3B:00.0" into sysfs' "0000:3b:00.0".
func NormalizePCIBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if parts := strings.SplitN(id, ":", 2); len(parts) == 2 && len(parts[0]) > 4 {
		id = parts[0][len(parts[0])-4:] + ":" + parts[1]
	}
	return id
}

// SemverFromDotted turns driver versions such as "535.104.05" or "560.28"
// into valid semver ("535.104.5", "560.28.0"): the API rejects leading zeros.
func SemverFromDotted(v string) string {
	parts := strings.Split(strings.TrimSpace(v), ".")
	nums := []int{0, 0, 0}
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return v
		}
		nums[i] = n
	}
	return fmt.Sprintf("%d.%d.%d", nums[0], nums[1], nums[2])
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
