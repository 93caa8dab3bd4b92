// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

func unhealthy(reason string, effect resourceapi.DeviceTaintEffect) []resourceapi.DeviceTaint {
	return []resourceapi.DeviceTaint{{Key: resourceslices.TaintUnhealthy, Value: reason, Effect: effect, TimeAdded: &metav1.Time{Time: time.Unix(1700000000, 0)}}}
}

func devicesOf(res resourceslice.DriverResources) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, p := range res.Pools {
		for _, s := range p.Slices {
			for _, d := range s.Devices {
				out[d.Name] = d
			}
		}
	}
	return out
}

func TestTaintedPoolIsSplitUnderTheLowerLimit(t *testing.T) {
	// 100 whole GPUs fit one slice of 128; once one is tainted, the API
	// allows only 64 devices in its slice.
	var devices []resourceapi.Device
	for i := range 100 {
		devices = append(devices, resourceapi.Device{Name: deviceattr.GPUDeviceName(i)})
	}
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": {Slices: []resourceslice.Slice{{Devices: devices}}}}}
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	naive := devicesOf(res)
	d := naive["gpu-42"]
	d.Taints = unhealthy("xid-79", resourceapi.DeviceTaintEffectNoSchedule)
	res.Pools["n1"].Slices[0].Devices[42] = d
	if err := resourceslices.Validate(res); err == nil || !strings.Contains(err.Error(), "limit 64") {
		t.Fatalf("Validate of 100 devices with a taint in one slice = %v, want the 64 limit", err)
	}
	res.Pools["n1"].Slices[0].Devices[42].Taints = nil

	tainted := resourceslices.WithTaints(res, map[string][]resourceapi.DeviceTaint{"gpu-42": unhealthy("xid-79", resourceapi.DeviceTaintEffectNoSchedule)})
	if err := resourceslices.Validate(tainted); err != nil {
		t.Fatal(err)
	}
	got := tainted.Pools["n1"].Slices
	if len(got) != 2 || len(got[0].Devices) != 64 || len(got[1].Devices) != 36 {
		t.Fatalf("slices after tainting: %d", len(got))
	}
	all := devicesOf(tainted)
	if len(all) != 100 || len(all["gpu-42"].Taints) != 1 || all["gpu-42"].Taints[0].Value != "xid-79" || len(all["gpu-41"].Taints) != 0 {
		t.Fatalf("devices after tainting: %d, gpu-42 taints %v", len(all), all["gpu-42"].Taints)
	}
	if len(res.Pools["n1"].Slices) != 1 || len(res.Pools["n1"].Slices[0].Devices[42].Taints) != 0 {
		t.Fatal("WithTaints modified its input")
	}
	if same := resourceslices.WithTaints(res, nil); len(same.Pools["n1"].Slices) != 1 {
		t.Fatal("a pool without taints was re-split")
	}
}

func TestTaintsOnAPartitionedNode(t *testing.T) {
	inv := simulatedInventory(t, "h100x8")
	res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
	name := resourceslices.DynamicMigDeviceName(3, inv.GPUs[3].MigProfiles[0], inv.GPUs[3].MigProfiles[0].Placements[0].Start)
	tainted := resourceslices.WithTaints(res, map[string][]resourceapi.DeviceTaint{"gpu-3": unhealthy("ecc-dbe", resourceapi.DeviceTaintEffectNoExecute), name: unhealthy("ecc-dbe", resourceapi.DeviceTaintEffectNoExecute)})
	if err := resourceslices.Validate(tainted); err != nil {
		t.Fatal(err)
	}
	before, after := devicesOf(res), devicesOf(tainted)
	if len(before) != len(after) || len(after[name].Taints) != 1 || len(after["gpu-3"].Taints) != 1 {
		t.Fatalf("%d devices before, %d after; taints of %s: %v", len(before), len(after), name, after[name].Taints)
	}
}

func TestValidateRejectsBadTaints(t *testing.T) {
	many := make([]resourceapi.DeviceTaint, resourceslices.MaxTaintsPerDevice+1)
	for i := range many {
		many[i] = resourceapi.DeviceTaint{Key: fmt.Sprintf("example.com/t%d", i), Effect: resourceapi.DeviceTaintEffectNoSchedule}
	}
	for name, tc := range map[string]struct {
		taints []resourceapi.DeviceTaint
		want   string
	}{
		"too many":   {many, "17 taints, limit 16"},
		"bad key":    {[]resourceapi.DeviceTaint{{Key: "not a key", Effect: resourceapi.DeviceTaintEffectNoSchedule}}, "taint key"},
		"long value": {unhealthy(strings.Repeat("x", 64), resourceapi.DeviceTaintEffectNoSchedule), "value"},
		"bad effect": {unhealthy("xid-79", "PreferNoSchedule"), "use NoSchedule, NoExecute or None"},
	} {
		t.Run(name, func(t *testing.T) {
			res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": {Slices: []resourceslice.Slice{{Devices: []resourceapi.Device{{Name: "gpu-0", Taints: tc.taints}}}}}}}
			if err := resourceslices.Validate(res); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestTheAllocatorAvoidsATaintedGPU(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	res := resourceslices.WithTaints(resourceslices.Build("n1", inv, resourceslices.Options{}), map[string][]resourceapi.DeviceTaint{"gpu-0": unhealthy("xid-79", resourceapi.DeviceTaintEffectNoSchedule)})
	c := schedtest.New(t, driverName, "n1", res)
	if got := schedtest.Devices(c.Allocate(schedtest.Claim("c", schedtest.Request("gpus", "gpu.nvidia.com", 1)))); len(got) != 1 || !strings.HasSuffix(got[0], "gpu-1") {
		t.Fatalf("allocated %v, want the healthy gpu-1", got)
	}
	c = schedtest.New(t, driverName, "n1", res)
	if got := c.Allocate(schedtest.Claim("c2", schedtest.Request("gpus", "gpu.nvidia.com", 2))); got != nil {
		t.Fatalf("two GPUs allocated with one tainted: %v", schedtest.Devices(got))
	}
}
