// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"fmt"
	"sort"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// MigProfile is one GPU instance profile a MIG-capable GPU supports, with
// every placement NVML allows for it.
type MigProfile struct {
	// Name is NVIDIA's profile name, e.g. "1g.10gb" or "1g.10gb+me".
	Name string
	// GIProfileID is the profile ID NVML reports (Info.Id; the "ID" column
	// of `nvidia-smi mig -lgip`, e.g. 19 for an H100's 1g.10gb).
	GIProfileID int
	// GIProfileIndex is the nvml.GPU_INSTANCE_PROFILE_* value the profile
	// is looked up by (0 for 1g.10gb). It differs from GIProfileID on real
	// hardware; go-nvlib names profiles by it.
	GIProfileIndex int
	// CIProfileID selects the compute instance profile that spans the whole
	// GPU instance (the COMPUTE_INSTANCE_PROFILE_* value, which is also its
	// ID).
	CIProfileID int
	Info        nvml.GpuInstanceProfileInfo
	Placements  []nvml.GpuInstancePlacement
}

// MigDevice is a MIG device that exists on a GPU.
type MigDevice struct {
	UUID      string
	Profile   MigProfile
	Placement nvml.GpuInstancePlacement
	GIID      int
	CIID      int
}

// MemorySlices is the number of memory slices of a GPU: the end of its
// widest placement (8 on A100 and H100).
func MemorySlices(profiles []MigProfile) int {
	n := 0
	for _, p := range profiles {
		for _, pl := range p.Placements {
			n = max(n, int(pl.Start+pl.Size))
		}
	}
	return n
}

// computeProfileFor maps a GPU instance's slice count to the compute
// instance profile that uses all of it.
func computeProfileFor(slices uint32) (int, bool) {
	switch slices {
	case 1:
		return nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, true
	case 2:
		return nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE, true
	case 3:
		return nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, true
	case 4:
		return nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, true
	case 6:
		return nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, true
	case 7:
		return nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, true
	case 8:
		return nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE, true
	}
	return 0, false
}

// MigProfileName returns NVIDIA's name for a GPU instance profile on a GPU
// with memoryBytes of memory, e.g. "3g.40gb". index is the
// nvml.GPU_INSTANCE_PROFILE_* value the profile was looked up by: go-nvlib
// derives the slice count and the "+me" suffix from it, not from the
// profile ID NVML reports in info.Id (19 for an H100's 1g.10gb, which
// go-nvlib would reject).
func MigProfileName(lib nvml.Interface, index int, info nvml.GpuInstanceProfileInfo, memoryBytes uint64) (string, error) {
	ci, ok := computeProfileFor(info.SliceCount)
	if !ok {
		return "", fmt.Errorf("no compute profile for %d slices", info.SliceCount)
	}
	p, err := device.New(lib).NewMigProfile(index, ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, info.MemorySizeMB, memoryBytes)
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// migProfiles lists the GPU instance profiles of a MIG-capable GPU. Names
// come from go-nvlib so they match nvidia-smi and NVIDIA's tooling.
func migProfiles(lib nvml.Interface, dev nvml.Device, memoryBytes uint64) ([]MigProfile, error) {
	var out []MigProfile
	names := map[string]int{}
	for index := 0; index < nvml.GPU_INSTANCE_PROFILE_COUNT; index++ {
		info, ret := dev.GetGpuInstanceProfileInfo(index)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get MIG profile %d: %s", index, nvml.ErrorString(ret))
		}
		ci, ok := computeProfileFor(info.SliceCount)
		if !ok {
			continue
		}
		placements, ret := dev.GetGpuInstancePossiblePlacements(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get placements of MIG profile ID %d (index %d): %s", info.Id, index, nvml.ErrorString(ret))
		}
		name, err := MigProfileName(lib, index, info, memoryBytes)
		if err != nil {
			klog.InfoS("Skipping a MIG profile go-nvlib cannot name", "profileID", info.Id, "index", index, "err", err)
			continue // a profile go-nvlib does not know yet; skip rather than fail the node
		}
		if other, dup := names[name]; dup {
			// Two profiles with one name would publish duplicate devices
			// and the pool would be rejected; keep the first.
			klog.InfoS("Skipping a MIG profile whose name another profile already has", "name", name, "profileID", info.Id, "otherProfileID", other)
			continue
		}
		names[name] = int(info.Id)
		out = append(out, MigProfile{Name: name, GIProfileID: int(info.Id), GIProfileIndex: index, CIProfileID: ci, Info: info, Placements: placements})
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Info.SliceCount < out[b].Info.SliceCount })
	return out, nil
}

// ExistingMigDevices lists the MIG devices (GPU instance + compute
// instance) that exist on a GPU.
func ExistingMigDevices(dev nvml.Device, profiles []MigProfile) ([]MigDevice, error) {
	uuids, err := migUUIDs(dev)
	if err != nil {
		return nil, err
	}
	var out []MigDevice
	for _, p := range profiles {
		info := p.Info
		gis, ret := dev.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("list %s GPU instances: %s", p.Name, nvml.ErrorString(ret))
		}
		for _, gi := range gis {
			giInfo, ret := gi.GetInfo()
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("GPU instance info: %s", nvml.ErrorString(ret))
			}
			ciInfo, ret := gi.GetComputeInstanceProfileInfo(p.CIProfileID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
			if ret != nvml.SUCCESS {
				return nil, fmt.Errorf("compute instance profile of %s: %s", p.Name, nvml.ErrorString(ret))
			}
			cis, _ := gi.GetComputeInstances(&ciInfo)
			md := MigDevice{Profile: p, Placement: giInfo.Placement, GIID: int(giInfo.Id), CIID: -1}
			if len(cis) > 0 {
				if ci, ret := cis[0].GetInfo(); ret == nvml.SUCCESS {
					md.CIID = int(ci.Id)
				}
			}
			md.UUID = uuids[[2]int{md.GIID, md.CIID}]
			out = append(out, md)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Placement.Start < out[b].Placement.Start })
	return out, nil
}

// migUUIDs maps (GPU instance, compute instance) to MIG device UUIDs.
func migUUIDs(dev nvml.Device) (map[[2]int]string, error) {
	out := map[[2]int]string{}
	count, ret := dev.GetMaxMigDeviceCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("get MIG device count: %s", nvml.ErrorString(ret))
	}
	for i := 0; i < count; i++ {
		mig, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // no MIG device at this index
		}
		gi, ret1 := mig.GetGpuInstanceId()
		ci, ret2 := mig.GetComputeInstanceId()
		uuid, ret3 := mig.GetUUID()
		if ret1 == nvml.SUCCESS && ret2 == nvml.SUCCESS && ret3 == nvml.SUCCESS {
			out[[2]int{gi, ci}] = uuid
		}
	}
	return out, nil
}

// MigUUID returns the UUID of the MIG device for a GPU and compute instance.
func MigUUID(dev nvml.Device, giID, ciID int) (string, error) {
	uuids, err := migUUIDs(dev)
	if err != nil {
		return "", err
	}
	uuid, ok := uuids[[2]int{giID, ciID}]
	if !ok {
		return "", fmt.Errorf("no MIG device for GPU instance %d, compute instance %d", giID, ciID)
	}
	return uuid, nil
}
