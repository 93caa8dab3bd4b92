// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devkind

import (
	"reflect"
	"testing"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
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
