// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package allocator

import (
	"context"
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// slicesForMatch is one node's slice of GPUs and MIG devices, attributes
// and capacities as this driver publishes them (names only matter here).
func slicesForMatch(devices int) []*resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}}}
	for i := range devices {
		typ, profile := "gpu", ""
		if i%8 != 0 {
			typ, profile = "mig", fmt.Sprintf("%dg.%dgb", i%4+1, 10*(i%4+1))
		}
		d := resourceapi.Device{Name: fmt.Sprintf("dev-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type":                                 {StringValue: ptr.To(typ)},
			"uuid":                                 {StringValue: ptr.To(fmt.Sprintf("GPU-%08d", i))},
			"productName":                          {StringValue: ptr.To("NVIDIA H100 80GB HBM3")},
			"architecture":                         {StringValue: ptr.To("Hopper")},
			"index":                                {IntValue: ptr.To(int64(i / 8))},
			"driverVersion":                        {VersionValue: ptr.To("580.95.5")},
			"resource.kubernetes.io/pcieRoot":      {StringValue: ptr.To("pci0000:00")},
			"resource.kubernetes.io/pciBusID":      {StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", i/8))},
			"gpu.nvidia.com/cudaComputeCapability": {VersionValue: ptr.To("9.0.0")},
		}, Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			"memory":          {Value: resource.MustParse(fmt.Sprintf("%dGi", 10*(i%8+1)))},
			"multiprocessors": {Value: resource.MustParse("132")},
		}}
		if profile != "" {
			d.Attributes["profile"] = resourceapi.DeviceAttribute{StringValue: ptr.To(profile)}
		}
		s.Spec.Devices = append(s.Spec.Devices, d)
	}
	return []*resourceapi.ResourceSlice{s}
}

var matchSelectors = []string{
	`device.attributes['gpu.nvidia.com'].type == 'mig' && device.attributes['gpu.nvidia.com'].profile == '2g.20gb'`,
	`device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0`,
	`device.attributes['gpu.nvidia.com'].productName.matches('H100') && device.driver == 'gpu.nvidia.com'`,
	`device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))`,
	`device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'`,
	`device.attributes['gpu.nvidia.com'].profile == '1g.10gb'`, // absent on whole GPUs: an error
}

// TestDevicesMatchAsConvertedAlone: converted once or per call, a selector
// gives the same answer and the same error on every device.
func TestDevicesMatchAsConvertedAlone(t *testing.T) {
	ctx := context.Background()
	slices := slicesForMatch(32)
	ds := NewDevices(slices)
	var none *Devices // converts each device alone, for each call
	cache := NewCELCache(10)
	matched := 0
	for _, expr := range matchSelectors {
		compiled := cache.GetOrCompile(expr)
		if compiled.Error != nil {
			t.Fatalf("%s: %v", expr, compiled.Error)
		}
		for i := range slices[0].Spec.Devices {
			dev := &slices[0].Spec.Devices[i]
			want, wantErr := none.Match(ctx, compiled, "gpu.nvidia.com", dev)
			got, err := ds.Match(ctx, compiled, "gpu.nvidia.com", dev)
			if got != want || (err == nil) != (wantErr == nil) {
				t.Fatalf("%s on %s: converted once %v, %v; alone %v, %v", expr, dev.Name, got, err, want, wantErr)
			}
			// A copy is not one of ds's devices: converted alone, same answer.
			cp := *dev
			if got, err := ds.Match(ctx, compiled, "gpu.nvidia.com", &cp); got != want || (err == nil) != (wantErr == nil) {
				t.Fatalf("%s on a copy of %s: %v, %v; want %v, %v", expr, dev.Name, got, err, want, wantErr)
			}
			if got {
				matched++
			}
		}
	}
	if matched == 0 {
		t.Fatal("no selector matched any device")
	}
}

// BenchmarkMatch is one selector evaluation, as pkg/clusterview's
// diagnose and capacity paths make them for each device: perCall converts
// the device each time (a nil Devices, what MatchDevice did), converted
// reuses the slice's conversion.
func BenchmarkMatch(b *testing.B) {
	ctx := context.Background()
	slices := slicesForMatch(216) // a dynamic-MIG 8 x H100 node publishes 216 devices
	compiled := NewCELCache(10).GetOrCompile(matchSelectors[0])
	devs := slices[0].Spec.Devices
	var none *Devices
	run := func(b *testing.B, match func(dev *resourceapi.Device) (bool, error)) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := match(&devs[i%len(devs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	}
	b.Run("perCall", func(b *testing.B) {
		run(b, func(dev *resourceapi.Device) (bool, error) { return none.Match(ctx, compiled, "gpu.nvidia.com", dev) })
	})
	b.Run("converted", func(b *testing.B) {
		ds := NewDevices(slices)
		run(b, func(dev *resourceapi.Device) (bool, error) { return ds.Match(ctx, compiled, "gpu.nvidia.com", dev) })
	})
}
