// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

func opaque(source resourceapi.AllocationConfigSource, driver string, requests []string, raw string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source:   source,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(raw)},
		}},
	}
}

func timeSlice(interval string) string {
	return `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"` + interval + `"}}}`
}

func interval(t *testing.T, cfg configapi.Config) configapi.TimeSliceInterval {
	t.Helper()
	s := cfg.GetSharing()
	if s == nil || s.TimeSlicingConfig == nil {
		return ""
	}
	return s.TimeSlicingConfig.Interval
}

func TestConfigPrecedence(t *testing.T) {
	const drv = "gpu.nvidia.com"
	claim, class := resourceapi.AllocationConfigSourceClaim, resourceapi.AllocationConfigSourceClass
	configs, err := decodeConfigs(drv, []resourceapi.DeviceAllocationConfiguration{
		// Claim configs listed first still override class configs.
		opaque(claim, drv, nil, timeSlice("Short")),
		opaque(class, drv, nil, timeSlice("Long")),
		opaque(claim, drv, []string{"train"}, timeSlice("Medium")),
		// Another driver's config, even a malformed one, is ignored.
		opaque(claim, "other.example.com", nil, `{"not":"ours"`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for request, want := range map[string]configapi.TimeSliceInterval{
		"infer":       "Short",  // claim-wide claim config beats the class config
		"train":       "Medium", // the later, request-specific entry wins
		"train/small": "Medium", // a subrequest matches its parent request
	} {
		cfg, err := configFor(configs, request, configapi.WholeGPU)
		if err != nil {
			t.Fatal(err)
		}
		if got := interval(t, cfg); got != want {
			t.Errorf("request %s: interval %q, want %q", request, got, want)
		}
	}
}

func TestConfigDefaultsAndErrors(t *testing.T) {
	cfg, err := configFor(nil, "gpu", configapi.WholeGPU)
	if err != nil || cfg.Kind() != configapi.GpuConfigKind || cfg.GetSharing() != nil {
		t.Fatalf("default config = %+v, %v; want a GpuConfig that changes nothing", cfg, err)
	}
	if cfg, _ := configFor(nil, "mig", configapi.MIG); cfg.Kind() != configapi.MigDeviceConfigKind {
		t.Fatalf("default for MIG is %s", cfg.Kind())
	}
	_, err = decodeConfigs("gpu.nvidia.com", []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClass, "gpu.nvidia.com", nil, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","extra":true}`),
	})
	if err == nil || !strings.Contains(err.Error(), `devices.config[0] (from DeviceClass)`) || !strings.Contains(err.Error(), `unknown field "extra"`) {
		t.Fatalf("error %v does not say which config and field", err)
	}
	configs, _ := decodeConfigs("gpu.nvidia.com", []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, "gpu.nvidia.com", []string{"gpu"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig"}`),
	})
	if _, err := configFor(configs, "gpu", configapi.WholeGPU); err == nil || !strings.Contains(err.Error(), `request "gpu"`) {
		t.Fatalf("MigDeviceConfig on a GPU: %v", err)
	}
}
