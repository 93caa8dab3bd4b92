// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"strings"
	"testing"
)

func mpsConfig(mps string) string {
	return `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":` + mps + `}}`
}

func decodeAndValidate(raw string) error {
	cfg, err := Decode([]byte(raw))
	if err != nil {
		return err
	}
	cfg.Normalize()
	return cfg.Validate()
}

// Each of these once passed validation and then meant no memory limit at
// all: Quantity.Value() overflows to a useless number for 10E and 1e100, and
// MPS, which takes whole MiB, reads a sub-MiB limit as 0M, i.e. unlimited.
func TestValidateRejectsNoLimitByAccident(t *testing.T) {
	const field = "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: "
	const perDevice = `sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["0"]: `
	for mps, want := range map[string]string{
		`{"defaultPinnedDeviceMemoryLimit":"10E"}`:                  field + "10E is larger than",
		`{"defaultPinnedDeviceMemoryLimit":"1e100"}`:                field + "10e99 is larger than",
		`{"defaultPinnedDeviceMemoryLimit":"8Ei"}`:                  field + "9223372036854775807 is larger than",
		`{"defaultPinnedDeviceMemoryLimit":"512Ki"}`:                field + "512Ki is below 1Mi",
		`{"defaultPinnedDeviceMemoryLimit":1}`:                      field + "1 is below 1Mi",
		`{"defaultPinnedDeviceMemoryLimit":"0.5Mi"}`:                field + "512Ki is below 1Mi",
		`{"defaultPinnedDeviceMemoryLimit":"0"}`:                    field + "0 must be positive",
		`{"defaultPerDevicePinnedMemoryLimit":{"0":"10E"}}`:         perDevice + "10E is larger than",
		`{"defaultPerDevicePinnedMemoryLimit":{"0":"100Ki"}}`:       perDevice + "100Ki is below 1Mi",
		`{"defaultPerDevicePinnedMemoryLimit":{"0":"-1Gi"}}`:        perDevice + "-1Gi must be positive",
		`{"defaultPerDevicePinnedMemoryLimit":{"":"1Gi"}}`:          `sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[""]: empty key`,
		`{"defaultPerDevicePinnedMemoryLimit":{"0":"1Gi","1":"1"}}`: `defaultPerDevicePinnedMemoryLimit["1"]: 1 is below 1Mi`,
	} {
		err := decodeAndValidate(mpsConfig(mps))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to contain %q", mps, err, want)
		}
	}
	for _, ok := range []string{
		`{"defaultPinnedDeviceMemoryLimit":"1Mi"}`,
		`{"defaultPinnedDeviceMemoryLimit":"80Gi"}`,
		`{"defaultPinnedDeviceMemoryLimit":"1.5Gi","defaultPerDevicePinnedMemoryLimit":{"0":"2Gi","GPU-1":"4G"}}`,
	} {
		if err := decodeAndValidate(mpsConfig(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
