// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"strings"
	"testing"
)

func TestDecodeAndValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		raw, wantErr string
	}{
		"minimal gpu":      {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`},
		"time slicing":     {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`},
		"mps":              {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`},
		"wrong apiVersion": {raw: `{"apiVersion":"resource.nvidia.com/v1","kind":"GpuConfig"}`, wantErr: "apiVersion"},
		"unknown kind":     {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"TpuConfig"}`, wantErr: `unknown kind "TpuConfig"`},
		"unknown field":    {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"threads":3}}}`, wantErr: `unknown field "sharing.mpsConfig.threads"`},
		"wrong type":       {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":7}}`, wantErr: "sharing.strategy"},
		"bad interval":     {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Eons"}}}`, wantErr: "sharing.timeSlicingConfig.interval"},
		"bad percentage":   {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":101}}}`, wantErr: "outside 1-100"},
		"no strategy":      {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{}}`, wantErr: "sharing.strategy: required"},
		"mixed strategies": {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","timeSlicingConfig":{}}}`, wantErr: "not allowed with strategy MPS"},
		"not json":         {raw: `apiVersion: x`, wantErr: "not a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Decode([]byte(tc.raw))
			if err == nil {
				cfg.Normalize()
				err = cfg.Validate()
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestNormalizeDefaultsInterval(t *testing.T) {
	cfg, err := Decode([]byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Normalize()
	if got := cfg.GetSharing().TimeSlicingConfig.Interval; got != DefaultTimeSlice {
		t.Fatalf("interval defaulted to %q", got)
	}
	if err := cfg.AppliesTo(MIG); err == nil || !strings.Contains(err.Error(), "MigDeviceConfig") {
		t.Fatalf("GpuConfig on a MIG device: %v", err)
	}
}

// Decode errors name the field as the user wrote it and say what to write
// instead; Go type and struct names mean nothing to someone writing YAML.
func TestDecodeErrorsNameTheField(t *testing.T) {
	const head = `"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"`
	for raw, want := range map[string]string{
		`{"apiVersion":1,"kind":"GpuConfig"}`:                    `apiVersion: must be a string such as "resource.nvidia.com/v1beta1", got number`,
		`{` + head + `,"apiVersion":true}`:                       `apiVersion: must be a string such as "resource.nvidia.com/v1beta1", got bool`,
		`{"apiVersion":"resource.nvidia.com/v1beta1","kind":[]}`: `kind: must be a string such as "GpuConfig", got array`,
		`[1]`:                            `config: must be a JSON object, got array`,
		`{` + head + `,"sharing":"MPS"}`: `GpuConfig: sharing: must be an object, got string`,
		`{` + head + `,"sharing":{"strategy":7}}`:                                                                   `GpuConfig: sharing.strategy: must be a string such as "MPS", got number`,
		`{` + head + `,"sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":1e400}}}`:           `GpuConfig: sharing.mpsConfig.defaultActiveThreadPercentage: must be an integer such as 50, got number 1e400`,
		`{` + head + `,"sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":"50"}}}`:            `sharing.mpsConfig.defaultActiveThreadPercentage: must be an integer such as 50, got string`,
		`{` + head + `,"sharing":{"strategy":"MPS","mpsConfig":{"defaultPerDevicePinnedMemoryLimit":[]}}}`:          `sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: must be an object, got array`,
		`{` + head + `,"sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"abc"}}}`:          `GpuConfig: sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid quantity "abc": use a Kubernetes quantity such as 10Gi`,
		`{` + head + `,"sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":{}}}}`:             `sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid quantity {}: use a Kubernetes quantity such as 10Gi`,
		`{` + head + `,"sharing":{"strategy":"MPS","mpsConfig":{"defaultPerDevicePinnedMemoryLimit":{"0":"1Gb"}}}}`: `sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["0"]: invalid quantity "1Gb": use a Kubernetes quantity such as 10Gi`,
	} {
		err := decodeAndValidate(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n error %v\n want it to contain %q", raw, err, want)
			continue
		}
		for _, leak := range []string{"Go struct", "Go value", "of type", "regular expression", "TypeMeta"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("%s: error %q shows decoder internals (%q)", raw, err, leak)
			}
		}
	}
}
