// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const vfioClass = "vfio.gpu.nvidia.com"

// A passthrough GPU is published a second time, with what KubeVirt and a
// VM need, and the slices stay within the API's limits.
func TestPassthroughDevicePublished(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	o := resourceslices.Options{Passthrough: resourceslices.PassthroughSelector{Names: []string{simulate.PCIBusID(1)}}}
	table := resourceslices.NewTable(inv, o)
	var vfio []string
	for _, e := range table.Entries {
		if e.Kind == "vfio" {
			vfio = append(vfio, e.Device.Name)
			a := e.Device.Attributes
			if *a["type"].StringValue != "vfio" || *a["resource.kubernetes.io/pciBusID"].StringValue != simulate.PCIBusID(1) ||
				*a["iommuGroup"].StringValue != simulate.IOMMUGroup(1) || a["productName"].StringValue == nil ||
				a["resource.kubernetes.io/pcieRoot"].StringValue == nil || a["resource.kubernetes.io/numaNode"].IntValue == nil {
				t.Errorf("vfio device attributes %v", a)
			}
		}
	}
	if !slices.Equal(vfio, []string{"gpu-1-vfio"}) {
		t.Fatalf("vfio devices %v, want [gpu-1-vfio]", vfio)
	}
	if err := resourceslices.Validate(table.Resources("n1")); err != nil {
		t.Fatal(err)
	}
	if u := o.Passthrough.Unmatched(inv); len(u) != 0 {
		t.Fatalf("Unmatched %v", u)
	}
	if u := (resourceslices.PassthroughSelector{Names: []string{"7", "1"}}).Unmatched(inv); !slices.Equal(u, []string{"7"}) {
		t.Fatalf("Unmatched %v, want [7]", u)
	}
}

// The scheduler never hands a passthrough GPU out both ways, in each way a
// GPU can be published: whole, shareable and dynamic MIG.
func TestPassthroughExclusiveWithOtherDevices(t *testing.T) {
	all := resourceslices.PassthroughSelector{All: true}
	for _, tc := range []struct {
		name  string
		o     resourceslices.Options
		other func() schedtestRequest
	}{
		{"whole", resourceslices.Options{Passthrough: all}, func() schedtestRequest {
			return schedtestRequest{class: "gpu.nvidia.com"}
		}},
		{"mig", resourceslices.Options{Passthrough: all, DynamicMIG: true}, func() schedtestRequest {
			return schedtestRequest{class: "mig.nvidia.com"}
		}},
		{"shareable", resourceslices.Options{Passthrough: all, FractionalMemory: true}, func() schedtestRequest {
			return schedtestRequest{class: "gpu.nvidia.com", memory: "10Gi"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv := simulatedInventory(t, "h100x1")
			res := resourceslices.Build("n1", inv, tc.o)
			if err := resourceslices.Validate(res); err != nil {
				t.Fatal(err)
			}
			// The other way first: then passthrough must wait.
			c := schedtest.New(t, driverName, "n1", res)
			if got := c.Allocate(tc.other().claim("a")); got == nil {
				t.Fatal("other device not allocated on a free GPU")
			}
			if got := c.Allocate(schedtest.Claim("vm", schedtest.Request("vm", vfioClass, 1))); got != nil {
				t.Fatalf("passthrough allocated %v beside another claim on the GPU", schedtest.Devices(got))
			}
			// Passthrough first: then the other way must wait.
			c = schedtest.New(t, driverName, "n1", res)
			if got := c.Allocate(schedtest.Claim("vm", schedtest.Request("vm", vfioClass, 1))); !slices.Equal(schedtest.Devices(got), []string{"gpu-0-vfio"}) {
				t.Fatalf("passthrough allocated %v", schedtest.Devices(got))
			}
			if got := c.Allocate(tc.other().claim("b")); got != nil {
				t.Fatalf("%s allocated %v on a passed-through GPU", tc.name, schedtest.Devices(got))
			}
			// Admin access still gets the monitor device (prepare refuses it
			// while the GPU is passed through: pkg/prepare).
		})
	}
}

// Shares of a shareable passthrough GPU still coexist with each other.
func TestPassthroughSharesCoexist(t *testing.T) {
	inv := simulatedInventory(t, "h100x1")
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", inv, resourceslices.Options{Passthrough: resourceslices.PassthroughSelector{All: true}, FractionalMemory: true}))
	for _, n := range []string{"a", "b", "c"} {
		if got := c.Allocate((schedtestRequest{class: "gpu.nvidia.com", memory: "10Gi"}).claim(n)); got == nil {
			t.Fatalf("share %s not allocated", n)
		}
	}
}

// Without the option nothing changes: no vfio device, no counters.
func TestNoPassthroughByDefault(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	table := resourceslices.NewTable(inv, resourceslices.Options{})
	for _, e := range table.Entries {
		if e.Kind == "vfio" || len(e.Device.ConsumesCounters) > 0 {
			t.Fatalf("device %s: kind %s, counters %v", e.Device.Name, e.Kind, e.Device.ConsumesCounters)
		}
	}
}

type schedtestRequest struct{ class, memory string }

func (r schedtestRequest) claim(name string) *resourceapiClaim {
	req := schedtest.Request("r", r.class, 1)
	if r.memory != "" {
		req = schedtest.WithCapacity(req, map[resourceapiQualifiedName]string{"memory": r.memory})
	}
	return schedtest.Claim(name, req)
}

type (
	resourceapiClaim         = resourceapi.ResourceClaim
	resourceapiQualifiedName = resourceapi.QualifiedName
)

// A GPU in MIG mode that an admin laid out is not offered: a VM needs the
// GPU whole. CheckPassthrough says so, for the plugin's log.
func TestPassthroughNotOfferedInMIGMode(t *testing.T) {
	inv := simulatedInventory(t, "h100x1:mig")
	o := resourceslices.Options{Passthrough: resourceslices.PassthroughSelector{All: true}}
	for _, e := range resourceslices.NewTable(inv, o).Entries {
		if e.Kind == "vfio" {
			t.Fatalf("vfio device %s published for a GPU in MIG mode", e.Device.Name)
		}
	}
	if errs := resourceslices.CheckPassthrough(inv, o); len(errs) != 1 {
		t.Fatalf("CheckPassthrough = %v, want one reason", errs)
	}
}
