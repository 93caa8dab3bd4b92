// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const driver = "gpu.nvidia.com"

// classes is a fake DeviceClass lister.
type classes map[string]*resourceapi.DeviceClass

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

func class(name string, exprs ...string) *resourceapi.DeviceClass {
	dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		dc.Spec.Selectors = append(dc.Spec.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return dc
}

func exactly(name, class string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}
}

func opaque(drv, params string, requests ...string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: drv, Parameters: runtime.RawExtension{Raw: []byte(params)},
		}},
	}
}

func spec(reqs []resourceapi.DeviceRequest, cfgs ...resourceapi.DeviceClaimConfiguration) *resourceapi.ResourceClaimSpec {
	return &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Config: cfgs}}
}

const (
	gpuTS  = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`
	gpuMPS = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`
	migTS  = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing"}}`
)

func TestValidateSpec(t *testing.T) {
	gpu := []resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com")}
	pinned := classes{
		"mig-small":  class("mig-small", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"),
		"any-nvidia": class("any-nvidia", "device.driver == 'gpu.nvidia.com'"),
	}
	for _, tc := range []struct {
		name string
		spec *resourceapi.ResourceClaimSpec
		want []string // substrings, one per error, in order; none: admitted
	}{
		{"valid time-slicing", spec(gpu, opaque(driver, gpuTS)), nil},
		{"unknown field", spec(gpu, opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfg":{"interval":"Long"}}}`)),
			[]string{`spec.devices.config[0].opaque.parameters: GpuConfig: unknown field "sharing.timeSlicingConfg"`}},
		{"bad interval", spec(gpu, opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Longest"}}}`)),
			[]string{`spec.devices.config[0].opaque.parameters: GpuConfig: sharing.timeSlicingConfig.interval: unknown interval "Longest"; use Default, Short, Medium or Long`}},
		{"thread percentage out of range", spec(gpu, opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":150}}}`)),
			[]string{`spec.devices.config[0].opaque.parameters: GpuConfig: sharing.mpsConfig.defaultActiveThreadPercentage: 150 is outside 1-100`}},
		{"other driver's config is not read", spec(gpu, opaque("example.com/other", `{"anything": [1, 2]}`), opaque(driver, gpuTS)), nil},
		{"every bad config is named", spec(gpu, opaque(driver, `{"kind":"GpuConfig"}`), opaque("example.com/other", `nonsense`), opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{}}`)),
			[]string{`spec.devices.config[0].opaque.parameters: apiVersion: got ""`, `spec.devices.config[2].opaque.parameters: GpuConfig: sharing.strategy: required`}},
		{"GpuConfig on the MIG class", spec([]resourceapi.DeviceRequest{exactly("mig", "mig.nvidia.com")}, opaque(driver, gpuTS)),
			[]string{`spec.devices.config[0].opaque.parameters: for request "mig" (deviceClassName mig.nvidia.com): kind GpuConfig cannot configure a mig device: use kind MigDeviceConfig`}},
		{"GpuConfig on a class whose selector pins MIG", spec([]resourceapi.DeviceRequest{exactly("small", "mig-small")}, opaque(driver, gpuTS)),
			[]string{`for request "small" (deviceClassName mig-small): kind GpuConfig cannot configure a mig device`}},
		{"a class that pins no type is left to prepare", spec([]resourceapi.DeviceRequest{exactly("any", "any-nvidia")}, opaque(driver, migTS)), nil},
		{"a later config overrides an earlier one for its request", spec(
			[]resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com"), exactly("mig", "mig.nvidia.com")},
			opaque(driver, gpuTS), opaque(driver, migTS, "mig")), nil},
		{"a config for one request only is checked against that request", spec(
			[]resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com"), exactly("mig", "mig.nvidia.com")},
			opaque(driver, gpuTS, "mig")),
			[]string{`spec.devices.config[0].opaque.parameters: for request "mig"`}},
		{"a subrequest of firstAvailable is checked with its own class", spec(
			[]resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "whole", DeviceClassName: "gpu.nvidia.com"}, {Name: "slice", DeviceClassName: "mig.nvidia.com"}}}},
			opaque(driver, gpuMPS, "r")),
			[]string{`for request "r/slice" (deviceClassName mig.nvidia.com): kind GpuConfig cannot configure a mig device`}},
		{"a config no request selects is decoded but not validated, as at prepare", spec(gpu,
			opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"Bogus"}}`, "gpu"), opaque(driver, gpuTS)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := NewValidator(driver, pinned).ValidateSpec("spec", tc.spec)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d like %q", len(errs), errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d: got %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

func TestPinnedType(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want string // "" for unknown
	}{
		{"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", "gpu"},
		{`device.attributes["gpu.nvidia.com"]["type"] == "mig"`, "mig"},
		{`'mig' == device.attributes['gpu.nvidia.com'].type && device.capacity['gpu.nvidia.com'].memory >= quantity('10Gi')`, "mig"},
		{"device.attributes['gpu.nvidia.com'].type == 'gpu' || device.attributes['gpu.nvidia.com'].type == 'mig'", ""},
		{"device.attributes['gpu.nvidia.com'].type == 'gpu' && device.attributes['gpu.nvidia.com'].type == 'mig'", ""},
		{"device.attributes['example.com'].type == 'mig'", ""},
		{"device.attributes['gpu.nvidia.com'].type == 'vgpu'", ""},
		{"device.driver == 'gpu.nvidia.com'", ""},
	} {
		got, ok := pinnedType(driver, class("c", tc.expr).Spec.Selectors)
		if string(got) != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: got %q (%v), want %q", tc.expr, got, ok, tc.want)
		}
	}
}
