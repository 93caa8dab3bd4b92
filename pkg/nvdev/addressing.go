// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The addressing modes as NVIDIA's tools name them (go-nvlib's
// GetAddressingModeAsString, which NVIDIA's reference driver publishes as
// the addressingMode attribute).
const (
	AddressingModeHMM  = "HMM"
	AddressingModeATS  = "ATS"
	AddressingModeNone = "None"
)

// addressingMode is how the GPU reaches system-allocated memory (malloc,
// mmap), as nvmlDeviceGetAddressingMode reports it (NVML API reference,
// nvml.h): "HMM" where software mirrors the CPU's page tables on the GPU
// (Heterogeneous Memory Management: x86-64 hosts with NVIDIA's open kernel
// modules), "ATS" where CPU and GPU share one set of page tables through
// Address Translation Services (Grace Hopper, Grace Blackwell), "None"
// where the platform supports neither mode active now. NVML documents it
// "for Turing or newer fully supported devices, supported on Linux only" and
// answers NOT_SUPPORTED elsewhere. "" (the attribute left out, as NVIDIA's
// driver does) where the driver lacks the call or the GPU does not answer
// it; only a failure of the GPU itself is an error.
//
// The call is new in the R580 driver (first in the NVML 13.0 header, when
// go-nvml added it): older drivers do not export it, and go-nvml binds
// symbols lazily, so calling it there would end the process with
// "undefined symbol". The check names the symbol literally: test/nvidia
// looks for it in the calling function.
func addressingMode(lib nvml.Interface, dev nvml.Device) (string, error) {
	if lib.Extensions().LookupSymbol("nvmlDeviceGetAddressingMode") != nil {
		return "", nil
	}
	mode, ret := dev.GetAddressingMode()
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
		return "", nil
	default:
		return "", fmt.Errorf("get addressing mode: %s", nvml.ErrorString(ret))
	}
	return AddressingModeName(nvml.DeviceAddressingModeType(mode.Value)), nil
}

// AddressingModeName maps NVML's addressing mode to its name; "" for a
// value this build does not know (a newer driver's), which is left out
// rather than published under a guessed name.
func AddressingModeName(m nvml.DeviceAddressingModeType) string {
	switch m {
	case nvml.DEVICE_ADDRESSING_MODE_HMM:
		return AddressingModeHMM
	case nvml.DEVICE_ADDRESSING_MODE_ATS:
		return AddressingModeATS
	case nvml.DEVICE_ADDRESSING_MODE_NONE:
		return AddressingModeNone
	}
	return ""
}
