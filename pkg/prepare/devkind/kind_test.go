// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devkind

import (
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

var allKinds = []configapi.DeviceKind{configapi.WholeGPU, configapi.MIG, configapi.DynamicMIG, configapi.Monitor, configapi.VFIO}

// Every kind the table publishes has an implementation, and the kind read
// back from a device's first record is the kind that wrote it: release
// and restart see a device as prepare did, published or not.
func TestRecordRoundTrip(t *testing.T) {
	gpu := &nvdev.GPU{UUID: "GPU-0", PCIBusID: "0000:18:00.0", MemoryBytes: 80 << 30}
	for _, k := range allKinds {
		dev := &Device{Name: "d", Kind: k, GPU: gpu, StaticUUID: "MIG-0", Placement: mig.Placement{Profile: nvdev.MigProfile{Name: "1g.10gb"}, Start: 2, Size: 1}}
		impl := dev.Behavior()
		if impl == nil {
			t.Fatalf("kind %s has no implementation", k)
		}
		rec := checkpoint.PreparedDevice{Device: "d", UUID: gpu.UUID, AdminAccess: k == configapi.Monitor, Shared: k == configapi.Monitor}
		impl.Record(&rec, dev)
		if got := OfRecord(rec); reflect.TypeOf(got) != reflect.TypeOf(impl) {
			t.Errorf("kind %s: its record reads back as %T, want %T", k, got, impl)
		}
		if err := impl.Matches(rec, dev); err != nil {
			t.Errorf("kind %s: the device does not match its own record: %v", k, err)
		}
	}
}

// A device name that now means another GPU, or another placement, does
// not match the record: restore refuses it rather than configure the
// claim onto someone else's hardware.
func TestMatchesRefusesAnotherGPU(t *testing.T) {
	for _, k := range allKinds {
		orig := &Device{Name: "d", Kind: k, GPU: &nvdev.GPU{UUID: "GPU-0"}, Placement: mig.Placement{Profile: nvdev.MigProfile{Name: "1g.10gb"}, Start: 2, Size: 1}}
		rec := checkpoint.PreparedDevice{Device: "d", UUID: "GPU-0", AdminAccess: k == configapi.Monitor}
		orig.Behavior().Record(&rec, orig)
		moved := *orig
		moved.GPU = &nvdev.GPU{UUID: "GPU-1"}
		if err := moved.Behavior().Matches(rec, &moved); err == nil {
			t.Errorf("kind %s: a device on another GPU matches the record", k)
		}
		if !k.IsMIG() {
			continue
		}
		shifted := *orig
		shifted.Placement.Start = 4
		if err := shifted.Behavior().Matches(rec, &shifted); err == nil {
			t.Errorf("kind %s: a device at another placement matches the record", k)
		}
	}
}

// A device the node no longer publishes under any name (a chart value or
// feature gate turned off under its claim) is rebuilt from its record and
// its live GPU as the device its record describes, of the record's kind,
// for every kind that makes its hardware here; an admin's MIG device is
// never made here, so one the node does not publish is gone. A dynamic
// MIG record at a placement its GPU does not have is refused.
func TestRebuildFromRecord(t *testing.T) {
	prof := nvdev.MigProfile{Name: "1g.10gb", Placements: []nvml.GpuInstancePlacement{{Start: 2, Size: 1}}}
	gpu := &nvdev.GPU{UUID: "GPU-0", Minor: 3, PCIBusID: "0000:18:00.0", MigProfiles: []nvdev.MigProfile{prof}}
	names := map[configapi.DeviceKind]string{
		configapi.WholeGPU: deviceattr.GPUDeviceName(3), configapi.Monitor: deviceattr.MonitorDeviceName(3),
		configapi.VFIO: deviceattr.VFIODeviceName(3), configapi.MIG: "gpu-3-mig-1g.10gb-2", configapi.DynamicMIG: "gpu-3-mig-1g.10gb-2",
	}
	for _, k := range allKinds {
		orig := &Device{Name: names[k], Kind: k, GPU: gpu, StaticUUID: "MIG-0", Placement: mig.Placement{Profile: prof, Start: 2, Size: 1}}
		rec := checkpoint.PreparedDevice{Device: orig.Name, UUID: gpu.UUID, AdminAccess: k == configapi.Monitor}
		orig.Behavior().Record(&rec, orig)
		if got := KindOf(rec); got != k {
			t.Errorf("kind %s: its record reads back as kind %s", k, got)
		}
		dev, err := Of(k).Rebuild(rec, gpu, true, nil)
		if k == configapi.MIG {
			if err == nil {
				t.Errorf("an admin's MIG device the node does not publish was rebuilt: %+v", dev)
			}
			continue
		}
		if err != nil {
			t.Fatalf("kind %s: %v", k, err)
		}
		if dev.Kind != k || dev.Name != rec.Device || dev.GPU != gpu {
			t.Errorf("kind %s: rebuilt as %s %q on %s", k, dev.Kind, dev.Name, dev.GPU.UUID)
		}
		if err := dev.Behavior().Matches(rec, dev); err != nil {
			t.Errorf("kind %s: the rebuilt device is not its record's: %v", k, err)
		}
	}
	rec := checkpoint.PreparedDevice{Device: "gpu-3-mig-1g.10gb-4", Mig: &checkpoint.MigRecord{Dynamic: true, ParentUUID: gpu.UUID, Profile: "1g.10gb", Start: 4}}
	if dev, err := Of(configapi.DynamicMIG).Rebuild(rec, gpu, true, nil); err == nil {
		t.Errorf("a placement the GPU does not have was rebuilt: %+v", dev)
	}
}
