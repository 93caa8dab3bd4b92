// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func deviceNames(t *testing.T, profile string, o resourceslices.Options) []string {
	t.Helper()
	res := resourceslices.Build("n1", simulatedInventory(t, profile), o)
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Pools["n1"].Slices {
		for _, d := range s.Devices {
			if !deviceattr.IsMonitorDeviceName(d.Name) { // monitor_test.go
				names = append(names, d.Name)
			}
		}
	}
	return names
}

// TestAmpereDynamicMigNeedsAdminMigMode (defect 3): an A100 or A30, whose
// MIG mode only changes with a reset, is offered for dynamic MIG only when
// an admin already turned MIG mode on, and then never also as a whole GPU:
// in MIG mode it cannot run a whole-GPU workload, and the plugin will not
// turn MIG mode off for one.
func TestAmpereDynamicMigNeedsAdminMigMode(t *testing.T) {
	for _, model := range []string{"a100-40gb", "a100-80gb", "a30"} {
		if got := deviceNames(t, model+"x1", resourceslices.Options{DynamicMIG: true}); !slices.Equal(got, []string{"gpu-0"}) {
			t.Errorf("%s, MIG mode off: published %v, want the whole GPU only", model, got)
		}
		got := deviceNames(t, model+"x1"+simulate.MigSuffix, resourceslices.Options{DynamicMIG: true})
		if slices.Contains(got, "gpu-0") {
			t.Errorf("%s, MIG mode on: the whole GPU is published next to its MIG devices", model)
		}
		if len(got) < 13 || !strings.HasPrefix(got[0], "gpu-0-mig-1g") {
			t.Errorf("%s, MIG mode on: published %v", model, got)
		}
	}
	// Hopper and newer change MIG mode without a reset: both, always.
	for _, profile := range []string{"h100x1", "h100x1" + simulate.MigSuffix, "b200x1"} {
		if got := deviceNames(t, profile, resourceslices.Options{DynamicMIG: true}); !slices.Contains(got, "gpu-0") || len(got) != 26 {
			t.Errorf("%s: published %d devices %v", profile, len(got), got)
		}
	}
	// A whole-GPU request finds nothing on an A100 in MIG mode; MIG requests do.
	c := schedtest.New(t, driverName, "n1", resourceslices.Build("n1", simulatedInventory(t, "a100-80gbx1"+simulate.MigSuffix), resourceslices.Options{DynamicMIG: true}))
	if got := c.Allocate(schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))); got != nil {
		t.Fatalf("whole GPU %v allocated on an A100 in MIG mode", schedtest.Devices(got))
	}
	if got := c.Allocate(schedtest.Claim("mig", migRequest("mig", "7g.80gb"))); got == nil {
		t.Fatal("7g.80gb not allocated")
	}
}

// TestWholeGPUPublished: the rule pkg/driver's allocatable devices share.
func TestWholeGPUPublished(t *testing.T) {
	a100 := simulatedInventory(t, "a100-80gbx1"+simulate.MigSuffix).GPUs[0]
	h100 := simulatedInventory(t, "h100x1").GPUs[0]
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"A100 dynamic", resourceslices.WholeGPUPublished(a100, resourceslices.DynamicMIG), false},
		{"H100 dynamic", resourceslices.WholeGPUPublished(h100, resourceslices.DynamicMIG), true},
		{"static", resourceslices.WholeGPUPublished(h100, resourceslices.StaticMIG), false},
		{"whole", resourceslices.WholeGPUPublished(a100, resourceslices.Whole), true},
		{"shareable", resourceslices.WholeGPUPublished(h100, resourceslices.Shareable), true},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v", c.name, c.got)
		}
	}
}
