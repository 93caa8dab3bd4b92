// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// MIG device handles: what NVML hands out for a GPU instance with a
// compute instance.

package simulate

import (
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// migHandles returns a handle per MIG device (GPU instance with a compute
// instance), ordered by placement as NVML orders them.
func (m *migSim) migHandles(dev *server.Device) []nvml.Device {
	dev.RLock()
	gis := make([]*server.GpuInstance, 0, len(dev.GpuInstances))
	for gi := range dev.GpuInstances {
		gis = append(gis, gi)
	}
	dev.RUnlock()
	sort.Slice(gis, func(a, b int) bool { return gis[a].Info.Placement.Start < gis[b].Info.Placement.Start })
	var out []nvml.Device
	for _, gi := range gis {
		gi.RLock()
		for ci := range gi.ComputeInstances {
			out = append(out, m.handle(dev, gi, ci))
		}
		gi.RUnlock()
	}
	return out
}

// handle returns the cached handle of a MIG device; mock devices are large.
func (m *migSim) handle(parent *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance) nvml.Device {
	m.handlesMu.Lock()
	defer m.handlesMu.Unlock()
	h, ok := m.handles[ci]
	if !ok {
		h = m.migHandle(parent, gi, ci)
		m.handles[ci] = h
	}
	return h
}

func (m *migSim) migHandle(parent *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance) nvml.Device {
	row, _ := m.sim.Profile.hw.profileRow(gi.Info.ProfileId)
	ciInfo := parent.Config.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(ci.Info.ProfileId)]
	uuid := m.migUUID(parent, gi)
	// A MIG device's attributes, as nvmlDeviceGetAttributes_v2 reports them
	// for MIG device handles (the only handles it supports): the compute
	// instance's SMs, the GPU instance's engines, slices and memory.
	attrs := nvml.DeviceAttributes{
		MultiprocessorCount: ciInfo.MultiprocessorCount, SharedCopyEngineCount: row.ce,
		SharedDecoderCount: row.dec, SharedEncoderCount: row.enc, SharedJpegCount: row.jpeg, SharedOfaCount: row.ofa,
		GpuInstanceSliceCount: row.slices, ComputeInstanceSliceCount: ciInfo.SliceCount, MemorySizeMB: row.memMB,
	}
	lost := func() nvml.Return { return m.sim.fault(parent.UUID) }
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS },
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) {
			return parent.Config.Name + " MIG " + row.name, nvml.SUCCESS
		},
		GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
			if r := lost(); r != nvml.SUCCESS {
				return nvml.DeviceAttributes{}, r
			}
			return attrs, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			if r := lost(); r != nvml.SUCCESS {
				return nvml.Memory{}, r
			}
			return nvml.Memory{Total: row.memMB << 20, Free: row.memMB << 20}, nvml.SUCCESS
		},
	}
}

func hasComputeInstances(gi *server.GpuInstance) bool {
	gi.RLock()
	defer gi.RUnlock()
	return len(gi.ComputeInstances) > 0
}

// wireUUIDLookup makes DeviceGetHandleByUUID find MIG devices by their
// UUIDs too, as NVML does (nvcdi and the plugin's MIG capability lookup
// ask for them); an unknown UUID stays the mock's INVALID_ARGUMENT.
func (m *migSim) wireUUIDLookup() {
	gpuByUUID := m.sim.DeviceGetHandleByUUIDFunc
	m.sim.DeviceGetHandleByUUIDFunc = func(uuid string) (nvml.Device, nvml.Return) {
		h, ret := gpuByUUID(uuid)
		if ret == nvml.SUCCESS || len(uuid) < 4 || uuid[:4] != "MIG-" {
			return h, ret
		}
		for _, d := range m.sim.Devices {
			for _, mh := range m.migHandles(d.(*server.Device)) {
				if u, _ := mh.GetUUID(); u == uuid {
					return mh, nvml.SUCCESS
				}
			}
		}
		return h, ret
	}
}
