// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const driverName = "gpu.nvidia.com"

func simulatedInventory(t *testing.T, profile string) *nvdev.Inventory {
	t.Helper()
	_, inv, err := simulate.Discover(profile, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// mixedNode has four H100s and four A100-40GBs in one pool.
func mixedNode(t *testing.T) *schedtest.Cluster {
	h100 := simulatedInventory(t, "h100x4")
	a100 := simulatedInventory(t, "a100-40gbx4")
	for i, g := range a100.GPUs {
		g.Minor, g.Index = 4+i, 4+i
	}
	h100.GPUs = append(h100.GPUs, a100.GPUs...)
	return schedtest.New(t, driverName, "n1", resourceslices.Build("n1", h100, resourceslices.Options{}))
}

func TestAllocatorSelectsByAttributes(t *testing.T) {
	tests := []struct {
		name      string
		selectors []string
		count     int64
		want      int // GPUs expected; 0 means unsatisfiable
		check     func(t *testing.T, c *schedtest.Cluster, devices []string)
	}{
		{name: "any GPU", count: 1, want: 1},
		{name: "H100 by product name", count: 2, want: 2,
			selectors: []string{`device.attributes['gpu.nvidia.com'].productName.matches('H100')`},
			check:     expectAll(`H100`)},
		{name: "memory at least 64Gi", count: 1, want: 1,
			selectors: []string{`device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) >= 0`},
			check:     expectAll(`H100`)},
		{name: "A100 by memory at most 40Gi", count: 4, want: 4,
			selectors: []string{`device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) <= 0`},
			check:     expectAll(`A100`)},
		{name: "driver version as semver", count: 1, want: 1,
			selectors: []string{`device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.54.15'))`}},
		{name: "driver version too new", count: 1, want: 0,
			selectors: []string{`device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('999.0.0'))`}},
		{name: "compute capability", count: 4, want: 4,
			selectors: []string{`device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0`},
			check:     expectAll(`H100`)},
		{name: "unsatisfiable model", count: 1, want: 0,
			selectors: []string{`device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B300'`}},
		{name: "more GPUs than the node has", count: 9, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := mixedNode(t)
			got := c.Allocate(schedtest.Claim("c", schedtest.Request("gpus", "gpu.nvidia.com", tc.count, tc.selectors...)))
			devices := schedtest.Devices(got)
			if len(devices) != tc.want {
				t.Fatalf("allocated %v, want %d devices", devices, tc.want)
			}
			if tc.check != nil {
				tc.check(t, c, devices)
			}
		})
	}
}

func expectAll(model string) func(t *testing.T, c *schedtest.Cluster, devices []string) {
	return func(t *testing.T, c *schedtest.Cluster, devices []string) {
		for _, name := range devices {
			d := findDevice(t, c, name)
			if pn := *d.Attributes["productName"].StringValue; !contains(pn, model) {
				t.Errorf("device %s is %q, want a %s", name, pn, model)
			}
		}
	}
}

func TestAllocatorMatchAttributePCIeRoot(t *testing.T) {
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x8"), resourceslices.Options{}))
	root := resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot")
	for i := 0; i < 4; i++ {
		claim := schedtest.Claim("pair", schedtest.Request("gpus", "gpu.nvidia.com", 2))
		claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &root}}
		got := schedtest.Devices(c.Allocate(claim))
		if len(got) != 2 {
			t.Fatalf("pair %d: got %v, want two GPUs on one PCIe root", i, got)
		}
		a, b := findDevice(t, c, got[0]), findDevice(t, c, got[1])
		if *a.Attributes["resource.kubernetes.io/pcieRoot"].StringValue != *b.Attributes["resource.kubernetes.io/pcieRoot"].StringValue {
			t.Fatalf("pair %d: %s and %s are on different roots", i, got[0], got[1])
		}
	}
	// All four roots now hold an allocated pair; no GPU is left.
	if got := c.Allocate(schedtest.Claim("one-more", schedtest.Request("gpus", "gpu.nvidia.com", 1))); got != nil {
		t.Fatalf("allocated %v on a full node", schedtest.Devices(got))
	}
}

func TestAllocatorNeverHandsOutAGPUTwice(t *testing.T) {
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x8"), resourceslices.Options{}))
	seen := map[string]bool{}
	for i := 0; i < 8; i++ {
		got := schedtest.Devices(c.Allocate(schedtest.Claim("c", schedtest.Request("gpu", "gpu.nvidia.com", 1))))
		if len(got) != 1 || seen[got[0]] {
			t.Fatalf("claim %d got %v (seen %v)", i, got, seen)
		}
		seen[got[0]] = true
	}
	if got := c.Allocate(schedtest.Claim("ninth", schedtest.Request("gpu", "gpu.nvidia.com", 1))); got != nil {
		t.Fatalf("ninth claim allocated %v", schedtest.Devices(got))
	}
}

func TestExtendedResourceClass(t *testing.T) {
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x8"), resourceslices.Options{}))
	var gpuClass *resourceapi.DeviceClass
	for _, dc := range c.Classes {
		if dc.Spec.ExtendedResourceName != nil && *dc.Spec.ExtendedResourceName == "nvidia.com/gpu" {
			gpuClass = dc
		}
	}
	if gpuClass == nil || gpuClass.Name != "gpu.nvidia.com" {
		t.Fatalf("no DeviceClass maps the extended resource nvidia.com/gpu")
	}
	// The scheduler turns `limits: nvidia.com/gpu: 2` into a claim on that class.
	got := schedtest.Devices(c.Allocate(schedtest.Claim("ext", schedtest.Request("container-0", gpuClass.Name, 2))))
	if len(got) != 2 {
		t.Fatalf("extended-resource claim got %v", got)
	}
	// The MIG class selects no whole GPU.
	if got := c.Allocate(schedtest.Claim("mig", schedtest.Request("mig", "mig.nvidia.com", 1))); got != nil {
		t.Fatalf("mig.nvidia.com selected whole GPUs %v", schedtest.Devices(got))
	}
}

func findDevice(t *testing.T, c *schedtest.Cluster, name string) resourceapi.Device {
	t.Helper()
	for _, s := range c.Slices {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("device %s not published", name)
	return resourceapi.Device{}
}

func contains(s, sub string) bool {
	return strings.Contains(s, sub)
}
