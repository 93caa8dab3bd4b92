// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const monitorClass = "monitor.gpu.nvidia.com"

// withMonitorClass adds the chart's monitor DeviceClass
// (templates/deviceclass-monitor.yaml) to a cluster.
func withMonitorClass(c *schedtest.Cluster) *schedtest.Cluster {
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: monitorClass}}
	dc.Spec.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
		Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'monitor'"}}}
	c.Classes = append(c.Classes, dc)
	return c
}

func allDevices(name, class string, admin bool) resourceapi.DeviceRequest {
	r := schedtest.Request(name, class, 0)
	r.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	if admin {
		r.Exactly.AdminAccess = ptr.To(true)
	}
	return r
}

// TestMonitorDevicesArePublished: every GPU, in every publishing mode, has
// a monitor device with its identity, type "monitor" and no counters, and
// the slices stay within the API's limits.
func TestMonitorDevicesArePublished(t *testing.T) {
	for _, tc := range []struct {
		profile string
		o       resourceslices.Options
	}{
		{"h100x8", resourceslices.Options{DynamicMIG: true}},
		{"h100x8", resourceslices.Options{}},
		{"h100x2", resourceslices.Options{FractionalMemory: true}},
		{"a100-80gbx2" + simulate.MigSuffix, resourceslices.Options{}},
	} {
		t.Run(fmt.Sprintf("%s %+v", tc.profile, tc.o), func(t *testing.T) {
			inv := simulatedInventory(t, tc.profile)
			res := resourceslices.Build("n1", inv, tc.o)
			if err := resourceslices.Validate(res); err != nil {
				t.Fatal(err)
			}
			devs := devicesOf(res)
			monitors := 0
			for name := range devs {
				if deviceattr.IsMonitorDeviceName(name) {
					monitors++
				}
			}
			if monitors != len(inv.GPUs) {
				t.Errorf("%d monitor devices for %d GPUs", monitors, len(inv.GPUs))
			}
			for _, g := range inv.GPUs {
				d, ok := devs[deviceattr.MonitorDeviceName(g.Minor)]
				if !ok {
					t.Fatalf("no monitor device for GPU %d", g.Minor)
				}
				a := d.Attributes
				if *a[deviceattr.AttrType].StringValue != deviceattr.TypeMonitor || *a[deviceattr.AttrUUID].StringValue != g.UUID ||
					*a[deviceattr.AttrIndex].IntValue != int64(g.Index) || *a[deviceattr.AttrProductName].StringValue != g.ProductName {
					t.Errorf("monitor of GPU %d (%s) has attributes %v", g.Minor, g.UUID, a)
				}
				if len(d.ConsumesCounters) != 0 || d.AllowMultipleAllocations != nil {
					t.Errorf("monitor of GPU %d consumes counters %v / allows multiple allocations", g.Minor, d.ConsumesCounters)
				}
			}
		})
	}
}

// TestMonitorAllocation runs the real allocator over a busy node with
// dynamic MIG: the shipped classes never hand out monitor devices, and an
// admin-access request for every monitor device fits while a whole GPU and
// a MIG device are allocated.
func TestMonitorAllocation(t *testing.T) {
	inv := simulatedInventory(t, "h100x8")
	c := withMonitorClass(schedtest.New(t, driverName, "n1", resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})))
	whole := c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1)))
	mig := c.Allocate(schedtest.Claim("mig", migRequest("mig", "1g.10gb")))
	if whole == nil || mig == nil {
		t.Fatal("setup: whole GPU or MIG device not allocated")
	}
	for _, got := range [][]string{schedtest.Devices(whole), schedtest.Devices(mig)} {
		for _, d := range got {
			if deviceattr.IsMonitorDeviceName(d) {
				t.Fatalf("a shipped class allocated monitor device %s", d)
			}
		}
	}
	monitor := c.Allocate(schedtest.Claim("monitor", allDevices("all", monitorClass, true)))
	var want []string
	for _, g := range inv.GPUs {
		want = append(want, deviceattr.MonitorDeviceName(g.Minor))
	}
	got := schedtest.Devices(monitor)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("admin-access monitor claim got %v, want %v", got, want)
	}
	// The monitors take nothing from the workloads: the rest of the GPUs
	// are still free for whole-GPU claims.
	if rest := c.Allocate(schedtest.Claim("rest", schedtest.Request("gpu", "gpu.nvidia.com", 6))); rest == nil {
		t.Error("6 whole GPUs no longer fit beside the monitor claim")
	}
}

// TestMonitorTaints: health taints on a monitor device are published like
// a GPU's. allocationMode All asks for every matching device, so an
// admin-access claim for all monitors waits while one is tainted NoSchedule,
// unless it tolerates the taint (as a monitoring agent should, to watch an
// unhealthy GPU).
func TestMonitorTaints(t *testing.T) {
	inv := simulatedInventory(t, "h100x8")
	res := resourceslices.WithTaints(resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true}), map[string][]resourceapi.DeviceTaint{
		"gpu-3":         unhealthy("xid-79", resourceapi.DeviceTaintEffectNoSchedule),
		"gpu-3-monitor": unhealthy("xid-79", resourceapi.DeviceTaintEffectNoSchedule),
	})
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	if d := devicesOf(res)["gpu-3-monitor"]; len(d.Taints) != 1 || d.Taints[0].Value != "xid-79" {
		t.Fatalf("monitor of GPU 3 has taints %v", d.Taints)
	}
	c := withMonitorClass(schedtest.New(t, driverName, "n1", res))
	if got := c.Allocate(schedtest.Claim("monitor", allDevices("all", monitorClass, true))); got != nil {
		t.Fatalf("claim for all monitors got %v although gpu-3-monitor is tainted NoSchedule", schedtest.Devices(got))
	}
	tolerating := allDevices("all", monitorClass, true)
	tolerating.Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: resourceslices.TaintUnhealthy, Operator: resourceapi.DeviceTolerationOpExists}}
	if got := schedtest.Devices(c.Allocate(schedtest.Claim("tolerating", tolerating))); len(got) != 8 || !slices.Contains(got, "gpu-3-monitor") {
		t.Fatalf("tolerating admin-access claim got %v, want all 8 monitors", got)
	}
}

// NoMonitorDevices publishes no monitor device and leaves every other
// device as it was.
func TestNoMonitorDevices(t *testing.T) {
	for _, o := range []resourceslices.Options{{DynamicMIG: true}, {}} {
		inv := simulatedInventory(t, "h100x8")
		with := devicesOf(resourceslices.Build("n1", inv, o))
		o.NoMonitorDevices = true
		without := devicesOf(resourceslices.Build("n1", inv, o))
		var rest []string
		for _, d := range with {
			if !deviceattr.IsMonitorDeviceName(d.Name) {
				rest = append(rest, d.Name)
			}
		}
		var got []string
		for _, d := range without {
			got = append(got, d.Name)
		}
		// Slices may be cut elsewhere with fewer devices: compare the sets.
		slices.Sort(rest)
		slices.Sort(got)
		if len(rest) != len(with)-8 || !slices.Equal(got, rest) {
			t.Errorf("%+v: %d devices without monitors, want the %d non-monitor devices of %d", o, len(got), len(rest), len(with))
		}
	}
}
