// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// allocation is what prepared claims hold on each GPU the node publishes
// (a VM's GPU included, which NVML does not list), for the metrics
// (pkg/metrics ObserveAllocation). It is computed from the ledger's view,
// records of newer drivers included, when Prometheus scrapes: there is no
// second count to keep in step.
func (d *Driver) allocation() []metrics.GPUAllocation {
	return gpuAllocation(d.gpus, d.state.Ledger.View().Records())
}

// gpuAllocation sums records per GPU of inv. Records that hold their
// devices (completed, or waiting to be restored) count; a half-done
// prepare does not yet. Admin-access and monitor devices watch a GPU
// without using it and do not count either.
func gpuAllocation(inv *nvdev.Inventory, records []checkpoint.PreparedClaim) []metrics.GPUAllocation {
	type use struct {
		claims     map[string]map[types.UID]bool
		slices     int
		partMemory int64
		whole      bool
	}
	uses := map[string]*use{}
	byUUID := map[string]*nvdev.GPU{}
	for _, g := range inv.GPUs {
		uses[g.UUID] = &use{claims: map[string]map[types.UID]bool{}}
		byUUID[g.UUID] = g
	}
	for _, rec := range records {
		if !rec.Prepared() {
			continue
		}
		for _, dev := range rec.Devices {
			if dev.AdminAccess || deviceattr.IsMonitorDeviceName(dev.Device) {
				continue
			}
			gpu := dev.UUID
			if dev.Mig != nil {
				gpu = dev.Mig.ParentUUID
			}
			u, ok := uses[gpu]
			if !ok {
				continue // the GPU is gone (fell off the bus)
			}
			mode := deviceMode(dev)
			switch mode {
			case metricname.ModeMIG:
				u.slices += int(dev.Mig.Size)
				u.partMemory += profileMemory(byUUID[gpu], dev.Mig.Profile)
			case metricname.ModeFraction:
				if dev.Sharing != nil {
					u.partMemory += dev.Sharing.PinnedMemoryBytes
				}
			default:
				u.whole = true
			}
			if u.claims[mode] == nil {
				u.claims[mode] = map[types.UID]bool{}
			}
			u.claims[mode][rec.UID] = true
		}
	}
	out := make([]metrics.GPUAllocation, 0, len(inv.GPUs))
	for _, g := range inv.GPUs {
		u := uses[g.UUID]
		a := metrics.GPUAllocation{
			GPU: strconv.Itoa(g.Minor), UUID: g.UUID, Model: g.ProductName,
			Claims: map[string]int{}, MigSlicesInUse: u.slices,
			MemoryBytes: int64(g.MemoryBytes), MemoryAllocatedBytes: min(u.partMemory, int64(g.MemoryBytes)),
		}
		if g.MigCapable {
			a.MigSlices = nvdev.MemorySlices(g.MigProfiles)
		}
		if u.whole {
			a.MemoryAllocatedBytes = a.MemoryBytes
		}
		for mode, claims := range u.claims {
			a.Claims[mode] = len(claims)
		}
		a.State = gpuState(a.Claims)
		out = append(out, a)
	}
	return out
}

// deviceMode is how one prepared device holds its GPU.
func deviceMode(dev checkpoint.PreparedDevice) string {
	switch {
	case dev.Vfio != nil:
		return metricname.ModePassthrough
	case dev.Mig != nil:
		return metricname.ModeMIG
	case dev.ShareID != "":
		return metricname.ModeFraction
	case dev.Sharing != nil && dev.Sharing.Strategy == configapi.TimeSlicingStrategy:
		return metricname.ModeTimeSlicing
	case dev.Sharing != nil && dev.Sharing.Strategy == configapi.MpsStrategy:
		return metricname.ModeMPS
	}
	return metricname.ModeWhole
}

// gpuState orders the modes as metricname.LabelState documents.
func gpuState(claims map[string]int) string {
	switch {
	case claims[metricname.ModePassthrough] > 0:
		return metricname.StatePassthrough
	case claims[metricname.ModeMIG] > 0:
		return metricname.StateMIG
	case claims[metricname.ModeFraction] > 0:
		return metricname.StateFraction
	case claims[metricname.ModeTimeSlicing] > 0 || claims[metricname.ModeMPS] > 0:
		return metricname.StateShared
	case claims[metricname.ModeWhole] > 0:
		return metricname.StateWhole
	}
	return metricname.StateFree
}

// profileMemory is the memory of a MIG profile of g, 0 when g (or the
// profile) is unknown.
func profileMemory(g *nvdev.GPU, profile string) int64 {
	if g == nil {
		return 0
	}
	for _, p := range g.MigProfiles {
		if p.Name == profile {
			return int64(p.Info.MemorySizeMB) << 20
		}
	}
	return 0
}
