// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// AddressingModeDriver is the first driver major whose NVML has
// nvmlDeviceGetAddressingMode: it is in the NVML 13.0 header (CUDA 13.0,
// R580) and not in 12.9's (R575), as go-nvml's header history shows. A
// simulated node on an older driver lacks the symbol, as a real one does.
const AddressingModeDriver = 580

// atsModels are the simulated models on a Grace CPU: NVLink-C2C lets CPU
// and GPU share one set of page tables, which NVML reports as ATS
// (Address Translation Services). The others stand for x86-64 hosts with
// NVIDIA's open kernel modules (the default since R560, the only ones
// Blackwell runs) on a kernel with HMM, where NVML reports HMM, as in the
// A100 example of NVIDIA's reference driver's attribute reference
// (site/content/docs/reference/resourceslice-attributes.md).
var atsModels = map[string]bool{"gh200": true}

// wireSymbols answers go-nvml's LookupSymbol as the simulated driver
// version's libnvidia-ml would: nvmlDeviceGetAddressingMode exists from
// AddressingModeDriver on; the version is read at each call because a
// caller may set DriverVersion after New (pkg/backend does). go-nvml's
// mock server finds every symbol.
func (s *Simulator) wireSymbols() {
	s.LookupSymbolFunc = func(symbol string) error {
		if symbol == "nvmlDeviceGetAddressingMode" && driverMajor(s.DriverVersion) < AddressingModeDriver {
			return nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return nil
	}
}

// wireAddressingMode answers nvmlDeviceGetAddressingMode for dev: HMM, or
// ATS on Grace models (atsModels), failing while a fault is injected.
// nvmlDeviceGetAddressingMode is "for Turing or newer fully supported
// devices, supported on Linux only" (NVML API reference): every simulated
// model is Ampere or newer on Linux.
func (s *Simulator) wireAddressingMode(dev *server.Device) {
	mode := nvml.DEVICE_ADDRESSING_MODE_HMM
	if atsModels[s.Profile.Model] {
		mode = nvml.DEVICE_ADDRESSING_MODE_ATS
	}
	dev.GetAddressingModeFunc = func() (nvml.DeviceAddressingMode, nvml.Return) {
		if r := s.fault(dev.UUID); r != nvml.SUCCESS {
			return nvml.DeviceAddressingMode{}, r
		}
		return nvml.DeviceAddressingMode{Value: uint32(mode)}, nvml.SUCCESS
	}
}

// driverMajor is the major of a dotted driver version ("580.65.06"), 0
// when it has none.
func driverMajor(v string) int {
	major, _, _ := strings.Cut(strings.TrimSpace(v), ".")
	n, _ := strconv.Atoi(major)
	return n
}
