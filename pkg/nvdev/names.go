// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ArchitectureName maps NVML's architecture enum to the names NVIDIA's tools print.
func ArchitectureName(a nvml.DeviceArchitecture) string {
	switch a {
	case nvml.DEVICE_ARCH_KEPLER:
		return "Kepler"
	case nvml.DEVICE_ARCH_MAXWELL:
		return "Maxwell"
	case nvml.DEVICE_ARCH_PASCAL:
		return "Pascal"
	case nvml.DEVICE_ARCH_VOLTA:
		return "Volta"
	case nvml.DEVICE_ARCH_TURING:
		return "Turing"
	case nvml.DEVICE_ARCH_AMPERE:
		return "Ampere"
	case nvml.DEVICE_ARCH_ADA:
		return "Ada Lovelace"
	case nvml.DEVICE_ARCH_HOPPER:
		return "Hopper"
	case nvml.DEVICE_ARCH_BLACKWELL:
		return "Blackwell"
	default:
		return "Unknown"
	}
}

// BrandName maps NVML's brand enum to the names NVIDIA's tools print.
func BrandName(b nvml.BrandType) string {
	switch b {
	case nvml.BRAND_QUADRO:
		return "Quadro"
	case nvml.BRAND_TESLA:
		return "Tesla"
	case nvml.BRAND_NVS:
		return "NVS"
	case nvml.BRAND_GRID:
		return "Grid"
	case nvml.BRAND_GEFORCE:
		return "GeForce"
	case nvml.BRAND_TITAN:
		return "Titan"
	case nvml.BRAND_NVIDIA_VAPPS:
		return "NvidiaVApps"
	case nvml.BRAND_NVIDIA_VPC:
		return "NvidiaVPC"
	case nvml.BRAND_NVIDIA_VCS:
		return "NvidiaVCS"
	case nvml.BRAND_NVIDIA_VWS:
		return "NvidiaVWS"
	case nvml.BRAND_NVIDIA_CLOUD_GAMING:
		return "NvidiaCloudGaming"
	case nvml.BRAND_QUADRO_RTX:
		return "QuadroRTX"
	case nvml.BRAND_NVIDIA_RTX:
		return "NvidiaRTX"
	case nvml.BRAND_NVIDIA:
		return "Nvidia"
	case nvml.BRAND_GEFORCE_RTX:
		return "GeForceRTX"
	case nvml.BRAND_TITAN_RTX:
		return "TitanRTX"
	default:
		return "Unknown"
	}
}
