// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package dcgmview_test

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/dcgmview"
)

// device is a published device with string attributes (name -> value).
func device(name string, attrs map[string]string) resourceapi.Device {
	d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for k, v := range attrs {
		d.Attributes[resourceapi.QualifiedName(k)] = resourceapi.DeviceAttribute{StringValue: ptr.To(v)}
	}
	return d
}

func slice(driver, pool string, generation, count int64, devices ...resourceapi.Device) resourceapi.ResourceSlice {
	return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, Generation: generation, ResourceSliceCount: count}, Devices: devices,
	}}
}

func TestResolve(t *testing.T) {
	const parent = "GPU-11111111-2222-3333-4444-555555555555"
	mig := func(name, uuid string) resourceapi.Device {
		a := map[string]string{"type": "mig", "parentUUID": parent, "profile": "1g.10gb"}
		if uuid != "" {
			a["uuid"] = uuid
		}
		return device(name, a)
	}
	ix := dcgmview.NewIndex([]resourceapi.ResourceSlice{
		slice("gpu.nvidia.com", "node-a", 1, 2,
			device("gpu-0", map[string]string{"type": "gpu", "uuid": parent}),
			device("gpu-7", map[string]string{"type": "gpu", "uuid": "GPU-7"}), // shareable: a fraction's device is the GPU
			mig("gpu-0-mig-1g10gb-19-3", ""),
			// The name dynamic MIG devices had before the profile IDs: the
			// exporter's pattern needs two numbers after the profile, so
			// it reads nothing (and must not take the start for a profile ID).
			mig("gpu-0-mig-1g10gb-3", ""),
			// A static MIG device keeps that form and has its uuid.
			mig("gpu-0-mig-1g10gb-5", "MIG-static"),
		),
		slice("gpu.nvidia.com", "node-a", 1, 2,
			// With a uuid the name is never read, even one that matches.
			mig("gpu-0-mig-1g10gb-19-6", "MIG-made"),
			device("gpu-1", map[string]string{"type": "gpu"}),
			device("gpu-0-mig-x", map[string]string{"type": "mig", "profile": "1g.10gb"}),
			device("gpu-0-monitor", map[string]string{"type": "monitor", "uuid": parent}),
			// A name whose numbers overflow the exporter's 32-bit fields.
			mig("gpu-0-mig-1g10gb-4294967296-0", ""),
		),
		slice("other.example.com", "node-a", 1, 1, device("gpu-2", map[string]string{"type": "gpu", "uuid": "GPU-other"})),
	})
	for _, c := range []struct {
		device string
		want   dcgmview.Identity
		ok     bool
	}{
		{"gpu-0", dcgmview.Identity{Type: "gpu", GPUUUID: parent}, true},
		{"gpu-7", dcgmview.Identity{Type: "gpu", GPUUUID: "GPU-7"}, true},
		{"gpu-0-mig-1g10gb-19-3", dcgmview.Identity{Type: "mig", GPUUUID: parent, Profile: "1g.10gb",
			Dynamic: &dcgmview.MigSpec{ParentMinor: 0, GIProfileID: 19, PlacementStart: 3}}, true},
		{"gpu-0-mig-1g10gb-3", dcgmview.Identity{Type: "mig", GPUUUID: parent, Profile: "1g.10gb"}, true},
		{"gpu-0-mig-1g10gb-5", dcgmview.Identity{Type: "mig", GPUUUID: parent, MIGUUID: "MIG-static", Profile: "1g.10gb"}, true},
		{"gpu-0-mig-1g10gb-19-6", dcgmview.Identity{Type: "mig", GPUUUID: parent, MIGUUID: "MIG-made", Profile: "1g.10gb"}, true},
		{"gpu-0-mig-1g10gb-4294967296-0", dcgmview.Identity{Type: "mig", GPUUUID: parent, Profile: "1g.10gb"}, true},
		{"gpu-1", dcgmview.Identity{}, false},         // a GPU without a uuid
		{"gpu-0-mig-x", dcgmview.Identity{}, false},   // a MIG device without a parentUUID
		{"gpu-0-monitor", dcgmview.Identity{}, false}, // an unknown type
		{"gpu-2", dcgmview.Identity{}, false},         // another driver's device
		{"gpu-9", dcgmview.Identity{}, false},         // not published
	} {
		got, ok := ix.Resolve("node-a", c.device)
		if ok != c.ok || (ok && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%s: %+v (spec %+v) %v, want %+v (spec %+v) %v", c.device, got, got.Dynamic, ok, c.want, c.want.Dynamic, c.ok)
		}
	}
	if _, ok := ix.Resolve("node-b", "gpu-0"); ok {
		t.Error("a device of another pool resolved")
	}
}

// TestResolveNewestCompleteGeneration: the exporter looks devices up in a
// pool's newest generation, and only once all of its slices are there.
func TestResolveNewestCompleteGeneration(t *testing.T) {
	gpu := func(name, uuid string) resourceapi.Device {
		return device(name, map[string]string{"type": "gpu", "uuid": uuid})
	}
	ix := dcgmview.NewIndex([]resourceapi.ResourceSlice{
		slice("gpu.nvidia.com", "a", 1, 1, gpu("gpu-0", "GPU-old"), gpu("gpu-1", "GPU-gone")),
		slice("gpu.nvidia.com", "a", 2, 1, gpu("gpu-0", "GPU-new")),
		slice("gpu.nvidia.com", "b", 3, 2, gpu("gpu-0", "GPU-b")), // 1 of 2 slices
	})
	if id, ok := ix.Resolve("a", "gpu-0"); !ok || id.GPUUUID != "GPU-new" {
		t.Errorf("a/gpu-0: %+v %v, want the newest generation's GPU-new", id, ok)
	}
	if id, ok := ix.Resolve("a", "gpu-1"); ok {
		t.Errorf("a/gpu-1 of an older generation resolved to %+v", id)
	}
	if id, ok := ix.Resolve("b", "gpu-0"); ok {
		t.Errorf("b/gpu-0 of an incomplete generation resolved to %+v", id)
	}
}

func TestParseDynamicMigName(t *testing.T) {
	for name, want := range map[string]*dcgmview.MigSpec{
		"gpu-0-mig-1g10gb-19-3":           {0, 19, 3},
		"gpu-12-mig-1g10gbme-20-6":        {12, 20, 6},
		"gpu-3-mig-7g80gb-0-0":            {3, 0, 0},
		"gpu-0-mig-1g10gb-3":              nil, // the older and the static form
		"gpu-1-mig-3g40gb-4":              nil,
		"gpu-0":                           nil,
		"gpu-0-mig--19-3":                 nil, // no profile
		"gpu-x-mig-1g10gb-19-3":           nil,
		"gpu-0-mig-1g10gb-19-99999999999": nil,
	} {
		got, ok := dcgmview.ParseDynamicMigName(name)
		if (want == nil) == ok || (ok && got != *want) {
			t.Errorf("%s: %+v %v, want %+v", name, got, ok, want)
		}
	}
}
