// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestPublishedDevicesWithinAttributeLimit: every device of every
// simulated model, in every mode a node publishes (whole GPUs with monitor
// devices, dynamic MIG with and without the admin's MIG mode, static MIG of
// every profile, passthrough, memory fractions), carries at most the API's
// 32 attributes and capacities together, on a driver that reports the
// addressing mode (so that every attribute is there). MIG devices carry
// NVIDIA's attributes beside ours (issue 58, item 3): each one added takes
// from the same 32, and the API refuses the whole slice of a device over
// it.
func TestPublishedDevicesWithinAttributeLimit(t *testing.T) {
	all := resourceslices.PassthroughSelector{All: true}
	most, mostDevice := 0, ""
	for _, model := range simulate.ModelNames() {
		onR580 := func(t *testing.T, profile string) *nvdev.Inventory {
			_, inv := simulatedNodeOn(t, model+profile, r580, r580Cuda)
			return inv
		}
		for _, tc := range []struct {
			mode string
			inv  func(t *testing.T) *nvdev.Inventory
			o    resourceslices.Options
		}{
			{"whole", func(t *testing.T) *nvdev.Inventory { return onR580(t, "x2") }, resourceslices.Options{}},
			{"dynamic-mig", func(t *testing.T) *nvdev.Inventory { return onR580(t, "x2") }, resourceslices.Options{DynamicMIG: true}},
			{"dynamic-mig-mode-on", func(t *testing.T) *nvdev.Inventory { return onR580(t, "x2"+simulate.MigSuffix) }, resourceslices.Options{DynamicMIG: true}},
			{"static-mig", func(t *testing.T) *nvdev.Inventory {
				probe := onR580(t, "x1").GPUs[0]
				if len(probe.MigProfiles) == 0 {
					t.Skip("not MIG capable")
				}
				sim, inv := simulatedNodeOn(t, fmt.Sprintf("%sx%d%s", model, len(probe.MigProfiles), simulate.MigSuffix), r580, r580Cuda)
				return staticMig(t, sim, inv)
			}, resourceslices.Options{}},
			{"passthrough-dynamic-mig", func(t *testing.T) *nvdev.Inventory { return onR580(t, "x2") }, resourceslices.Options{DynamicMIG: true, Passthrough: all}},
			{"memory-fractions", func(t *testing.T) *nvdev.Inventory { return onR580(t, "x2") }, resourceslices.Options{FractionalMemory: true, Passthrough: all}},
		} {
			t.Run(model+"/"+tc.mode, func(t *testing.T) {
				inv := tc.inv(t)
				if inv.GPUs[0].AddressingMode == "" {
					t.Fatal("no addressing mode on the R580 driver: the test would not count every attribute")
				}
				res := resourceslices.Build("n1", inv, tc.o)
				devices := devicesOf(res)
				if len(devices) == 0 {
					t.Fatal("nothing published")
				}
				for name, d := range devices {
					n := len(d.Attributes) + len(d.Capacity)
					if n > resourceslices.MaxAttributesAndCapacities {
						t.Errorf("%s: %d attributes and capacities, the API allows %d", name, n, resourceslices.MaxAttributesAndCapacities)
					}
					if n > most {
						most, mostDevice = n, model+"/"+tc.mode+"/"+name
					}
				}
			})
		}
	}
	t.Logf("most attributes and capacities on one device: %d (%s), limit %d", most, mostDevice, resourceslices.MaxAttributesAndCapacities)
}
