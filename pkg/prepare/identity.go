// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
)

// Identity (issue 47). A device's name carries its GPU's minor number,
// and minors change: at a reboot, and within one boot when nvidia.ko is
// reloaded (a driver upgrade) while a GPU is away (bound to vfio-pci for
// a VM, or off the bus), which moves the GPUs after it down. A name can
// then mean another GPU, or nothing, and a device the node no longer
// publishes (a chart value or feature gate turned off) has no name at
// all. What a claim holds is its record's hardware, by identity: the GPU
// by UUID, a MIG device by its parent's UUID and its placement, a VM's
// GPU by UUID and PCI address. Every step that acts on a kept claim's
// hardware (restore, unprepare, the checks at start, the MPS supervisor)
// finds it so (liveDevice), never by the name alone; and a claim's CDI
// spec records the hardware it was written for (hardwareKey), so that
// start rewrites a spec whose device files are not the hardware's now.

// HardwareAnnotation is the CDI spec annotation that records, per device,
// the hardware the spec was written for: its UUID, its GPU's minor (the
// /dev/nvidia<minor> it names), a MIG device's parent, a VM's GPU's PCI
// address and IOMMU group.
const HardwareAnnotation = "gpu.nvidia.com/prepared-hardware"

// liveDevice is the device of the node that a recorded device's hardware
// is now: the published device of that name when it is the recorded
// hardware, else the one that is, published under another name (the GPU
// was renumbered), else one made from the live GPU (the node no longer
// publishes the device: a chart value or feature gate was turned off). It
// carries the record's name, which its CDI IDs are made of. It fails when
// the hardware is gone: the GPU is not on the node (lost, or away over a
// driver reload), or a MIG placement or an admin's MIG device no longer
// exists on it.
func (s *State) liveDevice(d checkpoint.PreparedDevice) (*AllocatableDevice, error) {
	named := s.Devices[d.Device]
	kind := devkind.KindOf(d)
	if named != nil && devkind.IsRecorded(d, named) {
		return named, nil
	}
	gpu := ledger.Of(d).GPU
	if gpu == "" {
		return nil, fmt.Errorf("device %s has no GPU on record", d.Device)
	}
	var g *nvdev.GPU
	var match *AllocatableDevice
	partitionable := false
	for _, dev := range s.Devices {
		if dev.GPU.UUID != gpu {
			continue
		}
		g = dev.GPU
		partitionable = partitionable || dev.Partitionable || dev.Behavior().PartitionsGPU()
		if devkind.IsRecorded(d, dev) && (match == nil || dev.Name < match.Name) {
			match = dev
		}
	}
	if match != nil {
		c := *match
		c.Name = d.Device
		return &c, nil
	}
	if g == nil && d.Vfio != nil && d.Vfio.GPU != nil && d.Vfio.GPU.UUID == gpu {
		// A VM's GPU the node does not publish (its recorded minor is
		// another GPU's since a driver reload): as its record describes
		// it; NVML does not see it while it is on vfio-pci.
		c := *d.Vfio.GPU
		c.Device = nil
		g = &c
	}
	if g == nil {
		return nil, fmt.Errorf("GPU %s of device %s is no longer on this node (lost, or away when the driver was loaded)", gpu, d.Device)
	}
	return devkind.Of(kind).Rebuild(d, g, partitionable, named)
}

// liveDeviceOrNil is liveDevice for the steps that act on a record alone
// where its hardware is gone (a kind's Release and StillConfigured take
// nil for that).
func (s *State) liveDeviceOrNil(d checkpoint.PreparedDevice) *AllocatableDevice {
	dev, err := s.liveDevice(d)
	if err != nil {
		return nil
	}
	return dev
}

// hardwareKey says which hardware a CDI spec's devices are: what the spec
// names of each (its device files follow from it), in device order.
func hardwareKey(devices []cdi.Device) string {
	parts := make([]string, 0, len(devices))
	for _, d := range devices {
		p := d.Name + "=" + d.UUID + "/" + strconv.Itoa(d.Minor)
		if d.ParentUUID != "" {
			p += "/" + d.ParentUUID + "/" + d.MigProfile
		}
		if d.VFIO != nil {
			p += "/vfio:" + d.VFIO.PCIBusID + "/" + d.VFIO.IOMMUGroup
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ";")
}

// specCurrent reports whether a claim's CDI spec is usable as it is: on
// disk, this driver's, carrying an undamaged record, written for the
// hardware that planned is now (same UUIDs, minors, addresses) and for the
// NVIDIA driver installed now (an in-place upgrade keeps all of the
// hardware's identity but deletes the libraries the spec mounts:
// cdi.Writer.DriverStale).
func (s *State) specCurrent(rec checkpoint.PreparedClaim, planned []plannedDevice) bool {
	annotations, ok := s.CDI.Annotations(rec.UID)
	if !ok || !checkpoint.SpecCarriesRecord(annotations) {
		return false
	}
	return annotations[HardwareAnnotation] == hardwareKey(cdiDevices(rec.Devices, planned)) && s.CDI.DriverStale(rec.UID) == ""
}

// movedDevices are the devices of a record that the node publishes under
// their names no more, or as other hardware: the claim keeps its own
// (liveDevice), and the scheduler, which goes by names, may count the
// wrong device as used until the claim is unprepared.
func (s *State) movedDevices(rec checkpoint.PreparedClaim) []string {
	var out []string
	for _, d := range rec.Devices {
		if named := s.Devices[d.Device]; named == nil || !devkind.IsRecorded(d, named) {
			out = append(out, d.Device)
		}
	}
	sort.Strings(out)
	return out
}
