// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// Issue 47: a kept claim's device metadata describes its own hardware,
// found by UUID (and placement), after a driver reload (or a reboot)
// renumbered the GPUs: not the GPU its device's name means now, whose
// minor, PCI address and UUID would tell the container another GPU's.
func TestDeviceMetadataFollowsTheHardware(t *testing.T) {
	_, inv, err := simulate.Discover("h100x3", testNode, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := make([]*nvdev.GPU, len(inv.GPUs))
	for i, g := range inv.GPUs {
		c := *g
		before[i] = &c
	}
	// GPU 0 away over a driver reload: GPUs 1 and 2 are minors 0 and 1.
	reloaded := *inv
	reloaded.GPUs = nil
	for i, g := range inv.GPUs[1:] {
		c := *g
		c.Minor, c.Index = i, i
		reloaded.GPUs = append(reloaded.GPUs, &c)
	}
	table := DeviceTable(&reloaded, resourceslices.Options{DynamicMIG: true}, nil)
	m := newDeviceMetadata(&reloaded, table)

	whole := checkpoint.PreparedDevice{Device: deviceattr.GPUDeviceName(1), Type: "gpu", UUID: before[1].UUID}
	attrs := m.attributes(whole)
	if got := attrs[string(deviceattr.AttrMinor)]; got.IntValue == nil || *got.IntValue != 0 {
		t.Errorf("whole GPU 1 (minor 0 now): metadata minor %v", got.IntValue)
	}
	if got := attrs["resource.kubernetes.io/pciBusID"]; got.StringValue == nil || *got.StringValue != before[1].PCIBusID {
		t.Errorf("whole GPU 1: metadata pciBusID %v, want its own %s", got.StringValue, before[1].PCIBusID)
	}

	prof := before[2].MigProfiles[0]
	migRec := checkpoint.PreparedDevice{Device: deviceattr.DynamicMigDeviceName(2, prof.Name, prof.GIProfileID, prof.Placements[0].Start), Type: "mig", UUID: "MIG-x",
		Mig: &checkpoint.MigRecord{ParentUUID: before[2].UUID, Profile: prof.Name, Start: prof.Placements[0].Start, Size: prof.Placements[0].Size, Dynamic: true}}
	attrs = m.attributes(migRec)
	if got := attrs[string(deviceattr.AttrParentMinor)]; got.IntValue == nil || *got.IntValue != 1 {
		t.Errorf("MIG device of GPU 2 (minor 1 now): metadata parent minor %v", got.IntValue)
	}
	if got := attrs["resource.kubernetes.io/pciBusID"]; got.StringValue != nil && *got.StringValue != before[2].PCIBusID {
		t.Errorf("MIG device of GPU 2: metadata pciBusID %s, not its parent's %s", *got.StringValue, before[2].PCIBusID)
	}

	// GPU 0 is gone: its claim's metadata says nothing of another GPU.
	gone := checkpoint.PreparedDevice{Device: deviceattr.GPUDeviceName(0), Type: "gpu", UUID: before[0].UUID}
	attrs = m.attributes(gone)
	if got := attrs[string(deviceattr.AttrMinor)]; got.IntValue != nil {
		t.Errorf("the absent GPU 0's metadata has minor %d, another GPU's", *got.IntValue)
	}
	if got := attrs[string(deviceattr.AttrUUID)]; got.StringValue == nil || *got.StringValue != before[0].UUID {
		t.Errorf("the absent GPU 0's metadata uuid %v", got.StringValue)
	}
}
