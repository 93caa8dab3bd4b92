// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// a100Node has an A100-80GB whose MIG mode an admin turned on: the only way
// an A100 is offered for dynamic MIG.
func a100Node(t *testing.T) *schedtest.Cluster {
	inv := simulatedInventory(t, "a100-80gbx1"+simulate.MigSuffix)
	res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	return schedtest.New(t, driverName, "n1", res)
}

func migRequest(name, profile string) resourceapi.DeviceRequest {
	return schedtest.Request(name, "mig.nvidia.com", 1, fmt.Sprintf(`device.attributes['gpu.nvidia.com'].profile == '%s'`, profile))
}

// TestA100MigTable proves the A100-80GB MIG limits with the scheduler's
// allocator: each profile fits exactly as often as the hardware allows.
func TestA100MigTable(t *testing.T) {
	for profile, max := range map[string]int{"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1, "1g.20gb": 4, "1g.10gb+me": 1} {
		t.Run(profile, func(t *testing.T) {
			c := a100Node(t)
			used := map[string]bool{}
			for i := 0; i < max; i++ {
				got := schedtest.Devices(c.Allocate(schedtest.Claim(fmt.Sprintf("c%d", i), migRequest("mig", profile))))
				if len(got) != 1 || used[got[0]] {
					t.Fatalf("%s #%d: got %v (already used %v)", profile, i+1, got, used)
				}
				used[got[0]] = true
			}
			if got := c.Allocate(schedtest.Claim("one-more", migRequest("mig", profile))); got != nil {
				t.Fatalf("%s #%d allocated %v; the GPU only has room for %d", profile, max+1, schedtest.Devices(got), max)
			}
		})
	}
}

func TestA100MixedLayouts(t *testing.T) {
	for name, tc := range map[string]struct {
		profiles []string
		fits     bool
	}{
		"3g+2g+1g+1g":   {[]string{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}, true},
		"4g+2g+1g":      {[]string{"4g.40gb", "2g.20gb", "1g.10gb"}, true},
		"2g+2g+2g+1g":   {[]string{"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb"}, true},
		"4g+3g":         {[]string{"4g.40gb", "3g.40gb"}, true},
		"4g+3g+1g":      {[]string{"4g.40gb", "3g.40gb", "1g.10gb"}, false},
		"7g+1g":         {[]string{"7g.80gb", "1g.10gb"}, false},
		"3g+3g+1g":      {[]string{"3g.40gb", "3g.40gb", "1g.10gb"}, false},
		"2g x3 + 1g x2": {[]string{"2g.20gb", "2g.20gb", "2g.20gb", "1g.10gb", "1g.10gb"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			c := a100Node(t)
			var reqs []resourceapi.DeviceRequest
			for i, p := range tc.profiles {
				reqs = append(reqs, migRequest(fmt.Sprintf("r%d", i), p))
			}
			got := c.Allocate(schedtest.Claim("mixed", reqs...))
			if (got != nil) != tc.fits {
				t.Fatalf("layout %v: allocated %v, want fits=%v", tc.profiles, schedtest.Devices(got), tc.fits)
			}
		})
	}
}

func h100Node(t *testing.T) *schedtest.Cluster {
	return schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x1"), resourceslices.Options{DynamicMIG: true}))
}

func TestWholeGPUAndMigExcludeEachOther(t *testing.T) {
	c := h100Node(t)
	if got := schedtest.Devices(c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1)))); len(got) != 1 || got[0] != "gpu-0" {
		t.Fatalf("whole GPU claim got %v", got)
	}
	if got := c.Allocate(schedtest.Claim("mig", migRequest("mig", "1g.10gb"))); got != nil {
		t.Fatalf("MIG device %v allocated on a GPU that is in use whole", schedtest.Devices(got))
	}

	c = h100Node(t)
	if got := c.Allocate(schedtest.Claim("mig", migRequest("mig", "1g.10gb"))); got == nil {
		t.Fatal("1g.10gb not allocated on an idle GPU")
	}
	if got := c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))); got != nil {
		t.Fatalf("whole GPU %v allocated while a MIG device is in use", schedtest.Devices(got))
	}
}

func TestMigDevicesOnOneParent(t *testing.T) {
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x8"), resourceslices.Options{DynamicMIG: true}))
	parent := resourceapi.FullyQualifiedName("gpu.nvidia.com/parentUUID")
	claim := schedtest.Claim("four", migRequest("a", "1g.10gb"), migRequest("b", "1g.10gb"), migRequest("c", "2g.20gb"), migRequest("d", "3g.40gb"))
	claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &parent}}
	got := schedtest.Devices(c.Allocate(claim))
	if len(got) != 4 {
		t.Fatalf("four MIG devices on one parent: got %v", got)
	}
	parents := map[string]bool{}
	for _, name := range got {
		parents[*findDevice(t, c, name).Attributes["parentUUID"].StringValue] = true
	}
	if len(parents) != 1 {
		t.Fatalf("devices %v span %d parents", got, len(parents))
	}
}

// TestMigMemoryGuard: four 1g.20gb take the H100's memory (and all eight
// memory slices); nothing else fits next to them.
func TestMigMemoryGuard(t *testing.T) {
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "h100x1"), resourceslices.Options{DynamicMIG: true}))
	four := schedtest.Claim("four", migRequest("a", "1g.20gb"), migRequest("b", "1g.20gb"), migRequest("c", "1g.20gb"), migRequest("d", "1g.20gb"))
	if got := c.Allocate(four); got == nil {
		t.Fatal("4 x 1g.20gb (80Gi) does not fit an H100")
	}
	if got := c.Allocate(schedtest.Claim("more", migRequest("a", "1g.10gb"))); got != nil {
		t.Fatalf("allocated %v beyond the GPU's memory", schedtest.Devices(got))
	}
}

// TestMigModeOnWithoutDevicesIsNotAWholeGPU: a GPU an admin put in MIG mode
// but left empty cannot run a whole-GPU workload (CUDA sees no device
// until MIG devices exist). Unless it is offered for dynamic MIG, the node
// publishes nothing for it, never a whole GPU.
func TestMigModeOnWithoutDevicesIsNotAWholeGPU(t *testing.T) {
	for _, profile := range []string{"a100-80gbx1", "h100x1"} {
		inv := simulatedInventory(t, profile+simulate.MigSuffix)
		for _, o := range []resourceslices.Options{{}, {FractionalMemory: true}} {
			for _, s := range resourceslices.Build("n1", inv, o).Pools["n1"].Slices {
				for _, d := range s.Devices {
					// Only its monitor device (admin access) is published.
					if !deviceattr.IsMonitorDeviceName(d.Name) {
						t.Fatalf("%s in MIG mode without MIG devices, options %+v: published %s", profile, o, d.Name)
					}
				}
			}
		}
	}
}
