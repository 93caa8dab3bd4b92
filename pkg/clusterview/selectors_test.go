// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"reflect"
	"testing"
)

func TestReferences(t *testing.T) {
	for expr, want := range map[string][]ref{
		`device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B300'`: {{Name: "gpu.nvidia.com/productName"}},
		`device.attributes["gpu.nvidia.com"]["profile"] == "1g.10gb" && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0`: {
			{Name: "gpu.nvidia.com/profile"}, {Capacity: true, Name: "gpu.nvidia.com/memory"}},
		`device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:10'`: {{Name: "resource.kubernetes.io/pcieRoot"}},
		`device.driver == 'gpu.nvidia.com'`:                                    nil,
		`this does not parse (`:                                                nil,
	} {
		if got := references(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("references(%s) = %v, want %v", expr, got, want)
		}
	}
}

// TestSelectorReads: a result may be kept per combination of values read
// only when the expression reads nothing else of the device.
func TestSelectorReads(t *testing.T) {
	for expr, want := range map[string]bool{
		"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'":         true,
		"device.attributes['gpu.nvidia.com']['profile'] == '1g.10gb' && device.allowMultipleAllocations": true,
		"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0":                      true,
		"has(device.attributes['gpu.nvidia.com'].uuid)":                                                  true,
		"device.attributes['gpu.nvidia.com'].exists(k, k == 'profile')":                                  false,
		"size(device.attributes) > 1":                                                                    false,
		"device.attributes[device.driver].type == 'gpu'":                                                 false,
	} {
		if _, got := selectorReads(expr); got != want {
			t.Errorf("selectorReads(%q) complete = %v, want %v", expr, got, want)
		}
	}
}
