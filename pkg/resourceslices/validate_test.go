// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

func pool(devices ...resourceapi.Device) resourceslice.DriverResources {
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": {Slices: []resourceslice.Slice{{Devices: devices}}}}}
}

func TestValidateRejectsWhatTheAPIRejects(t *testing.T) {
	bad := "1.02.3"
	many := make([]resourceapi.Device, MaxDevicesPerSlice+1)
	for i := range many {
		many[i].Name = fmt.Sprintf("gpu-%d", i)
	}
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	for i := 0; i <= MaxAttributesAndCapacities; i++ {
		attrs[resourceapi.QualifiedName(fmt.Sprintf("a%d", i))] = str("x")
	}
	for name, tc := range map[string]struct {
		res  resourceslice.DriverResources
		want string
	}{
		"bad device name":   {pool(resourceapi.Device{Name: "GPU_0"}), "name:"},
		"duplicate device":  {pool(resourceapi.Device{Name: "gpu-0"}, resourceapi.Device{Name: "gpu-0"}), "duplicate"},
		"too many devices":  {pool(many...), "limit 128"},
		"non-semver":        {pool(resourceapi.Device{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"driverVersion": {VersionValue: &bad}}}), "not semver"},
		"too many attrs":    {pool(resourceapi.Device{Name: "gpu-0", Attributes: attrs}), "limit 32"},
		"long attr name":    {pool(resourceapi.Device{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{resourceapi.QualifiedName(strings.Repeat("a", 33)): str("x")}}), "1-32 characters"},
		"camelCase counter": {resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": {Slices: []resourceslice.Slice{{SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0", Counters: map[string]resourceapi.Counter{"memorySlice0": {}}}}}}}}}, "RFC 1123"},
		"two values in one": {pool(resourceapi.Device{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"x": {StringValue: &bad, IntValue: new(int64)}}}), "exactly one value"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.res)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestChunkSplitsLargeNodes(t *testing.T) {
	devices := make([]int, 300)
	chunks := chunk(devices, MaxDevicesPerSlice)
	if len(chunks) != 3 || len(chunks[0]) != 128 || len(chunks[2]) != 44 {
		t.Fatalf("chunks of 300: %d", len(chunks))
	}
}
