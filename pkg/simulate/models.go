// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// The simulated models carry the MIG tables real GPUs report, not go-nvml's
// mock tables (whose profile IDs equal the GPU_INSTANCE_PROFILE_* enum index,
// whose 1g.20gb/3g/7g placements are too narrow and whose H200/B200 1g
// memory rounds to the next profile's name, which is how h200x1 and b200x1
// came to publish duplicate devices).
//
// Sources, per row below:
//   - [guide]  NVIDIA Multi-Instance GPU User Guide,
//     https://docs.nvidia.com/datacenter/tesla/mig-user-guide/ :
//     getting-started-with-mig.html (`nvidia-smi mig -lgip`, `-lgipp` and
//     `-lcip` on an A100-SXM4-40GB: IDs, memory, SMs, engines, placements;
//     GPU instance IDs by placement) and supported-mig-profiles.html (names,
//     instance counts and engines of A30, A100, H100, H200 and B200).
//   - [lgip]   `nvidia-smi mig -lgip` as published by users of the product
//     (A100-SXM4-80GB; A30 on driver 535.183.01 with `-lgi`, `-lcip` and
//     MIG device memory; H100 80GB HBM3; H200 1g/2g/7g rows and MIG device
//     SMs; B200 1g.23gb memory and SMs).
//   - [derived] not in any published table found: taken from the same row
//     of the sibling product on the same die (H200 from H100) or scaled from
//     the 1g row (B200), chosen so that NVIDIA's profile naming gives the
//     published name. The README's simulator table lists these.
//
// Profile IDs, the thing defect 1 was about, come from [guide]/[lgip] for
// A100, A30, H100 and H200: 19/20/15/14/9/5/0 on eight-slice GPUs and
// 14/21/5/6/0 on the A30. B200's are [derived] from the same GB100/GH100
// scheme (NVIDIA's B200 table lists names but no IDs).

// giRow is one row of `nvidia-smi mig -lgip` plus its `-lgipp` placements.
type giRow struct {
	name      string // NVIDIA's profile name, as nvidia-smi prints it
	enum      int    // the nvml.GPU_INSTANCE_PROFILE_* index NVML looks it up by
	id        uint32 // the profile ID NVML reports (-lgip "ID")
	instances uint32
	memMB     uint64
	sms       uint32
	dec, enc  uint32
	ce, jpeg  uint32
	ofa       uint32
	slices    uint32   // compute slices ("1g" = 1)
	size      uint32   // memory slices a placement spans
	starts    []uint32 // -lgipp placement starts
}

// model is a simulated GPU product.
type model struct {
	config gpus.Config
	// cores is what nvmlDeviceGetNumGpuCores reports (SMs x FP32 cores per
	// SM of the compute capability).
	cores int
	sms   int
	// memSlices is the GPU's number of MIG memory slices.
	memSlices uint32
	profiles  []giRow
}

func seq(n uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}

const (
	p1    = nvml.GPU_INSTANCE_PROFILE_1_SLICE
	p1me  = nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1
	p1mem = nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2
	p2    = nvml.GPU_INSTANCE_PROFILE_2_SLICE
	p2me  = nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1
	p3    = nvml.GPU_INSTANCE_PROFILE_3_SLICE
	p4    = nvml.GPU_INSTANCE_PROFILE_4_SLICE
	p7    = nvml.GPU_INSTANCE_PROFILE_7_SLICE
)

var (
	// A100-SXM4-40GB: 108 SMs (6912 cores); every row [guide] -lgip/-lgipp.
	a100_40gb = model{
		config: gpus.Config{Name: "NVIDIA A100-SXM4-40GB", Architecture: nvml.DEVICE_ARCH_AMPERE, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 40960, CudaMajor: 8, CudaMinor: 0, PciDeviceId: 0x20B010DE},
		cores: 6912, sms: 108, memSlices: 8,
		profiles: []giRow{
			{"1g.5gb", p1, 19, 7, 4864, 14, 0, 0, 1, 0, 0, 1, 1, seq(7)},
			{"1g.5gb+me", p1me, 20, 1, 4864, 14, 1, 0, 1, 1, 1, 1, 1, seq(7)},
			{"1g.10gb", p1mem, 15, 4, 9856, 14, 1, 0, 1, 0, 0, 1, 2, []uint32{0, 2, 4, 6}},
			{"2g.10gb", p2, 14, 3, 9856, 28, 1, 0, 2, 0, 0, 2, 2, []uint32{0, 2, 4}},
			{"3g.20gb", p3, 9, 2, 19968, 42, 2, 0, 3, 0, 0, 3, 4, []uint32{0, 4}},
			{"4g.20gb", p4, 5, 1, 19968, 56, 2, 0, 4, 0, 0, 4, 4, []uint32{0}},
			{"7g.40gb", p7, 0, 1, 40192, 98, 5, 0, 7, 1, 1, 7, 8, []uint32{0}},
		},
	}
	// A100-SXM4-80GB: [lgip] IDs, memory and SMs; engines and placements as
	// the 40GB product ([guide]: "the profile names will change according to
	// the memory proportion").
	a100_80gb = model{
		config: gpus.Config{Name: "NVIDIA A100-SXM4-80GB", Architecture: nvml.DEVICE_ARCH_AMPERE, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 81920, CudaMajor: 8, CudaMinor: 0, PciDeviceId: 0x20B210DE},
		cores: 6912, sms: 108, memSlices: 8,
		profiles: []giRow{
			{"1g.10gb", p1, 19, 7, 9728, 14, 0, 0, 1, 0, 0, 1, 1, seq(7)},
			{"1g.10gb+me", p1me, 20, 1, 9728, 14, 1, 0, 1, 1, 1, 1, 1, seq(7)},
			{"1g.20gb", p1mem, 15, 4, 19968, 14, 1, 0, 1, 0, 0, 1, 2, []uint32{0, 2, 4, 6}},
			{"2g.20gb", p2, 14, 3, 19968, 28, 1, 0, 2, 0, 0, 2, 2, []uint32{0, 2, 4}},
			{"3g.40gb", p3, 9, 2, 40192, 42, 2, 0, 3, 0, 0, 3, 4, []uint32{0, 4}},
			{"4g.40gb", p4, 5, 1, 40192, 56, 2, 0, 4, 0, 0, 4, 4, []uint32{0}},
			{"7g.80gb", p7, 0, 1, 80896, 98, 5, 0, 7, 1, 1, 7, 8, []uint32{0}},
		},
	}
	// A30: 56 SMs (3584 cores), four memory slices; every row [lgip]
	// (driver 535.183.01), placements {0,1,2,3}:1, {0,2}:2, {0}:4.
	a30 = model{
		config: gpus.Config{Name: "NVIDIA A30", Architecture: nvml.DEVICE_ARCH_AMPERE, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 24576, CudaMajor: 8, CudaMinor: 0, PciDeviceId: 0x20B710DE},
		cores: 3584, sms: 56, memSlices: 4,
		profiles: []giRow{
			{"1g.6gb", p1, 14, 4, 5952, 14, 1, 0, 1, 0, 0, 1, 1, seq(4)},
			{"1g.6gb+me", p1me, 21, 1, 5952, 14, 1, 0, 1, 1, 1, 1, 1, seq(4)},
			{"2g.12gb", p2, 5, 2, 11968, 28, 2, 0, 2, 0, 0, 2, 2, []uint32{0, 2}},
			{"2g.12gb+me", p2me, 6, 1, 11968, 28, 2, 0, 2, 1, 1, 2, 2, []uint32{0, 2}},
			{"4g.24gb", p4, 0, 1, 24000, 56, 4, 0, 4, 1, 1, 4, 4, []uint32{0}},
		},
	}
	// H100 80GB HBM3 (SXM5): 132 SMs (16896 cores); every row [lgip].
	h100 = model{
		config: gpus.Config{Name: "NVIDIA H100 80GB HBM3", Architecture: nvml.DEVICE_ARCH_HOPPER, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 81920, CudaMajor: 9, CudaMinor: 0, PciDeviceId: 0x233010DE},
		cores: 16896, sms: 132, memSlices: 8,
		profiles: []giRow{
			{"1g.10gb", p1, 19, 7, 9984, 16, 1, 0, 1, 1, 0, 1, 1, seq(7)},
			{"1g.10gb+me", p1me, 20, 1, 9984, 16, 1, 0, 1, 1, 1, 1, 1, seq(7)},
			{"1g.20gb", p1mem, 15, 4, 20096, 26, 1, 0, 1, 1, 0, 1, 2, []uint32{0, 2, 4, 6}},
			{"2g.20gb", p2, 14, 3, 20096, 32, 2, 0, 2, 2, 0, 2, 2, []uint32{0, 2, 4}},
			{"3g.40gb", p3, 9, 2, 40448, 60, 3, 0, 3, 3, 0, 3, 4, []uint32{0, 4}},
			{"4g.40gb", p4, 5, 1, 40448, 64, 4, 0, 4, 4, 0, 4, 4, []uint32{0}},
			{"7g.80gb", p7, 0, 1, 81152, 132, 7, 0, 8, 7, 1, 7, 8, []uint32{0}},
		},
	}
	// H200 (SXM, 141GB): the GH100 die of the H100. 1g.18gb, 1g.18gb+me,
	// 2g.35gb and 7g.141gb are [lgip]; 1g.35gb, 3g.71gb and 4g.71gb are
	// [derived] (IDs and SMs of the H100 rows, memory of the 2g row and
	// about twice it).
	h200 = model{
		config: gpus.Config{Name: "NVIDIA H200", Architecture: nvml.DEVICE_ARCH_HOPPER, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 144384, CudaMajor: 9, CudaMinor: 0, PciDeviceId: 0x233510DE},
		cores: 16896, sms: 132, memSlices: 8,
		profiles: []giRow{
			{"1g.18gb", p1, 19, 7, 16384, 16, 1, 0, 1, 1, 0, 1, 1, seq(7)},
			{"1g.18gb+me", p1me, 20, 1, 16384, 16, 1, 0, 1, 1, 1, 1, 1, seq(7)},
			{"1g.35gb", p1mem, 15, 4, 33280, 26, 1, 0, 1, 1, 0, 1, 2, []uint32{0, 2, 4, 6}},
			{"2g.35gb", p2, 14, 3, 33280, 32, 2, 0, 2, 2, 0, 2, 2, []uint32{0, 2, 4}},
			{"3g.71gb", p3, 9, 2, 68096, 60, 3, 0, 3, 3, 0, 3, 4, []uint32{0, 4}},
			{"4g.71gb", p4, 5, 1, 68096, 64, 4, 0, 4, 4, 0, 4, 4, []uint32{0}},
			{"7g.141gb", p7, 0, 1, 143360, 132, 7, 0, 8, 7, 1, 7, 8, []uint32{0}},
		},
	}
	// GH200 (the Grace Hopper superchip's GPU, 96GB HBM3; nvidia-smi names
	// it "NVIDIA GH200 480GB" after the module's LPDDR5X): the GH100 die of
	// the H100, 132 SMs (16896 cores), compute capability 9.0, run by an
	// arm64 Grace CPU. Sources:
	//   - names and instance counts: NVIDIA's MIG tooling,
	//     https://github.com/NVIDIA/mig-parted/blob/main/deployments/systemd/config-default.yaml
	//     ("# H100-96GB, PG506-96GB, GH200": 1g.12gb x7, 1g.12gb+me x1,
	//     2g.24gb x3, 3g.48gb x2, 4g.48gb x1, 7g.96gb x1; GH200's PCI device
	//     ID 0x234210DE in its all-balanced filter), and the H100 table of
	//     https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html
	//     (the same seven rows as an 80GB H100, names following the memory).
	//   - 1g.24gb: the H100 table's 1g.20gb row on 96 GB [derived]; a GH200
	//     site publishes it with 26 SMs next to 2g.24gb's 32
	//     (https://www.cc.u-tokyo.ac.jp/en/supercomputer/miyabi/service/mig.php).
	//   - IDs, SMs, engines and placements: the H100 rows [derived] (same
	//     die); memory: the H100 rows scaled by 96/80, rounded down to
	//     128 MiB [derived], which go-nvlib names as NVIDIA does.
	// The 144GB HBM3e GH200 (0x234810DE: 1g.18gb, 1g.36gb, 2g.36gb ...) is
	// not modelled.
	gh200 = model{
		config: gpus.Config{Name: "NVIDIA GH200 480GB", Architecture: nvml.DEVICE_ARCH_HOPPER, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 98304, CudaMajor: 9, CudaMinor: 0, PciDeviceId: 0x234210DE},
		cores: 16896, sms: 132, memSlices: 8,
		profiles: []giRow{
			{"1g.12gb", p1, 19, 7, 11904, 16, 1, 0, 1, 1, 0, 1, 1, seq(7)},
			{"1g.12gb+me", p1me, 20, 1, 11904, 16, 1, 0, 1, 1, 1, 1, 1, seq(7)},
			{"1g.24gb", p1mem, 15, 4, 24064, 26, 1, 0, 1, 1, 0, 1, 2, []uint32{0, 2, 4, 6}},
			{"2g.24gb", p2, 14, 3, 24064, 32, 2, 0, 2, 2, 0, 2, 2, []uint32{0, 2, 4}},
			{"3g.48gb", p3, 9, 2, 48512, 60, 3, 0, 3, 3, 0, 3, 4, []uint32{0, 4}},
			{"4g.48gb", p4, 5, 1, 48512, 64, 4, 0, 4, 4, 0, 4, 4, []uint32{0}},
			{"7g.96gb", p7, 0, 1, 97280, 132, 7, 0, 8, 7, 1, 7, 8, []uint32{0}},
		},
	}
	// B200: 148 SMs (18944 cores). Names, instance counts, NVDEC/JPEG/OFA
	// and copy engines [guide]; 1g.23gb memory (20992 MiB) and 18 SMs
	// [lgip]; IDs, the other rows' memory and SMs [derived].
	b200 = model{
		config: gpus.Config{Name: "NVIDIA B200", Architecture: nvml.DEVICE_ARCH_BLACKWELL, Brand: nvml.BRAND_NVIDIA,
			MemoryMB: 184320, CudaMajor: 10, CudaMinor: 0, PciDeviceId: 0x290110DE},
		cores: 18944, sms: 148, memSlices: 8,
		profiles: []giRow{
			{"1g.23gb", p1, 19, 7, 20992, 18, 1, 0, 2, 1, 0, 1, 1, seq(7)},
			{"1g.23gb+me", p1me, 20, 1, 20992, 18, 1, 0, 2, 1, 1, 1, 1, seq(7)},
			{"1g.45gb", p1mem, 15, 4, 42240, 18, 1, 0, 2, 1, 0, 1, 2, []uint32{0, 2, 4, 6}},
			{"2g.45gb", p2, 14, 3, 42240, 36, 1, 0, 3, 1, 0, 2, 2, []uint32{0, 2, 4}},
			{"3g.90gb", p3, 9, 2, 85504, 54, 1, 0, 6, 1, 0, 3, 4, []uint32{0, 4}},
			{"4g.90gb", p4, 5, 1, 85504, 72, 1, 0, 8, 1, 0, 4, 4, []uint32{0}},
			{"7g.180gb", p7, 0, 1, 178944, 148, 1, 0, 16, 1, 1, 7, 8, []uint32{0}},
		},
	}
)

// ciProfileFor maps compute slices to the COMPUTE_INSTANCE_PROFILE_* value,
// which is also the compute instance profile ID NVML reports (-lcip shows
// "1c.3g.20gb" as ID 0, "2c.3g.20gb" as 1 and "3g.20gb" as 2 [guide]).
var ciProfileFor = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
}

// migProfiles builds the tables go-nvml's mock server serves: GPU instance
// profiles keyed by the enum index NVML looks them up by (their Id is the
// real profile ID), placements and compute instance profiles keyed by the
// real profile ID, as NVML keys them.
func (m model) migProfiles() gpus.MIGProfileConfig {
	out := gpus.MIGProfileConfig{
		GpuInstanceProfiles:       map[int]nvml.GpuInstanceProfileInfo{},
		ComputeInstanceProfiles:   map[int]map[int]nvml.ComputeInstanceProfileInfo{},
		GpuInstancePlacements:     map[int][]nvml.GpuInstancePlacement{},
		ComputeInstancePlacements: map[int]map[int][]nvml.ComputeInstancePlacement{},
	}
	for _, r := range m.profiles {
		out.GpuInstanceProfiles[r.enum] = nvml.GpuInstanceProfileInfo{
			Id: r.id, IsP2pSupported: 0, SliceCount: r.slices, InstanceCount: r.instances,
			MultiprocessorCount: r.sms, CopyEngineCount: r.ce, DecoderCount: r.dec, EncoderCount: r.enc,
			JpegCount: r.jpeg, OfaCount: r.ofa, MemorySizeMB: r.memMB,
		}
		for _, s := range r.starts {
			out.GpuInstancePlacements[int(r.id)] = append(out.GpuInstancePlacements[int(r.id)], nvml.GpuInstancePlacement{Start: s, Size: r.size})
		}
		cis := map[int]nvml.ComputeInstanceProfileInfo{}
		ciPlacements := map[int][]nvml.ComputeInstancePlacement{}
		// Compute instances of c slices inside the GPU instance: -lcip lists
		// one per slice count up to the GPU instance's; SMs per compute slice
		// as for a 1-slice instance [derived], the full one with all SMs.
		perSlice := m.profiles[0].sms
		for c, ciEnum := range ciProfileFor {
			if c > r.slices {
				continue
			}
			sms := c * perSlice
			if c == r.slices {
				sms = r.sms
			}
			n := r.slices / c
			cis[ciEnum] = nvml.ComputeInstanceProfileInfo{
				Id: uint32(ciEnum), SliceCount: c, InstanceCount: n, MultiprocessorCount: sms,
				SharedCopyEngineCount: r.ce, SharedDecoderCount: r.dec, SharedEncoderCount: r.enc,
				SharedJpegCount: r.jpeg, SharedOfaCount: r.ofa,
			}
			for k := uint32(0); k < n; k++ {
				ciPlacements[ciEnum] = append(ciPlacements[ciEnum], nvml.ComputeInstancePlacement{Start: k * c, Size: c})
			}
		}
		out.ComputeInstanceProfiles[int(r.id)] = cis
		out.ComputeInstancePlacements[int(r.id)] = ciPlacements
	}
	return out
}

// profileRow finds a model's row by real profile ID.
func (m model) profileRow(id uint32) (giRow, bool) {
	for _, r := range m.profiles {
		if r.id == id {
			return r, true
		}
	}
	return giRow{}, false
}

// giIDFor is the GPU instance ID the driver gives a placement: the index of
// the placement's memory range in a binary tree over the memory slices
// (whole GPU 0, halves 1-2, quarters 3-6, eighths 7-14 on eight-slice
// GPUs). This reproduces every ID in NVIDIA's examples: on an A100 the
// 4g.20gb at 0:4 is GPU instance 1, 2g.10gb at 4:2 is 5 and 1g.5gb at 6:1
// is 13 ([guide]); on an A30 1g.6gb at 0:1 and 1:1 are 3 and 4 and 2g.12gb
// at 2:2 is 2 ([lgip]).
func giIDFor(memSlices, start, size uint32) uint32 {
	// A placement of `size` slices sits at tree level log2(memSlices/size);
	// a profile with fewer memory slices than a power of two never occurs.
	level := uint32(0)
	for span := memSlices; span > size; span /= 2 {
		level++
	}
	return (1 << level) - 1 + start/size
}
