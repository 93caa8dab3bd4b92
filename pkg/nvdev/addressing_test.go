// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev_test

import (
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// noAddressingMode is the NVML of a driver before R580: it does not
// export nvmlDeviceGetAddressingMode.
var noAddressingMode = &mock.ExtendedInterface{LookupSymbolFunc: func(symbol string) error {
	if symbol == "nvmlDeviceGetAddressingMode" {
		return nvml.ERROR_FUNCTION_NOT_FOUND
	}
	return nil
}}

// onDriver discovers a simulated node whose NVML reports driver.
func onDriver(t *testing.T, profile, driver string) (*simulate.Simulator, *nvdev.Inventory) {
	t.Helper()
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	sim.DriverVersion = driver
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	return sim, inv
}

// TestAddressingMode: the addressing mode is NVML's answer where the
// driver has the call (R580 on): HMM for the x86 models, ATS for Grace
// Hopper; none on the 570 driver, which lacks the symbol (the simulator
// answers LookupSymbol as that driver's library would, so a call made
// without the check would find no answer wired and panic).
func TestAddressingMode(t *testing.T) {
	for _, tc := range []struct{ profile, driver, want string }{
		{"h100x2", "580.126.20", nvdev.AddressingModeHMM},
		{"a100-80gbx1", "580.65.06", nvdev.AddressingModeHMM},
		{"b200x1", "590.44.01", nvdev.AddressingModeHMM},
		{"gh200x1", "580.126.20", nvdev.AddressingModeATS},
		{"h100x2", simulate.DriverVersion, ""},
		{"gh200x1", "575.57.08", ""},
	} {
		_, inv := onDriver(t, tc.profile, tc.driver)
		for _, g := range inv.GPUs {
			if g.AddressingMode != tc.want {
				t.Errorf("%s on %s: GPU %d addressing mode %q, want %q", tc.profile, tc.driver, g.Minor, g.AddressingMode, tc.want)
			}
		}
	}
}

// TestAddressingModeAnswers: NVML's other answers. NOT_SUPPORTED (a
// platform without the query), an unknown value (a newer driver's mode)
// and the symbol missing leave the attribute out and keep the GPU; a GPU
// that fails the query is left out, as for any other query it fails.
func TestAddressingModeAnswers(t *testing.T) {
	for name, tc := range map[string]struct {
		mode   nvml.DeviceAddressingMode
		ret    nvml.Return
		want   string
		failed bool
	}{
		"none":          {nvml.DeviceAddressingMode{Value: uint32(nvml.DEVICE_ADDRESSING_MODE_NONE)}, nvml.SUCCESS, nvdev.AddressingModeNone, false},
		"not supported": {nvml.DeviceAddressingMode{}, nvml.ERROR_NOT_SUPPORTED, "", false},
		"version":       {nvml.DeviceAddressingMode{}, nvml.ERROR_ARGUMENT_VERSION_MISMATCH, "", false},
		"unknown value": {nvml.DeviceAddressingMode{Value: 7}, nvml.SUCCESS, "", false},
		"GPU lost":      {nvml.DeviceAddressingMode{}, nvml.ERROR_GPU_IS_LOST, "", true},
	} {
		t.Run(name, func(t *testing.T) {
			sim, _ := onDriver(t, "h100x1", "580.126.20")
			sim.Devices[0].(*server.Device).GetAddressingModeFunc = func() (nvml.DeviceAddressingMode, nvml.Return) { return tc.mode, tc.ret }
			inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
			if err != nil {
				t.Fatal(err)
			}
			if tc.failed {
				if len(inv.GPUs) != 0 || len(inv.Failed) != 1 {
					t.Fatalf("%d GPUs, %d failed: want the GPU left out", len(inv.GPUs), len(inv.Failed))
				}
				return
			}
			if len(inv.GPUs) != 1 {
				t.Fatalf("%d GPUs, failed %v: want the GPU kept", len(inv.GPUs), inv.Failed)
			}
			if got := inv.GPUs[0].AddressingMode; got != tc.want {
				t.Fatalf("addressing mode %q, want %q", got, tc.want)
			}
		})
	}
}
