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
