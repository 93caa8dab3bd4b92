// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package deviceattr is the vocabulary of the devices the driver publishes:
// attribute, capacity and type names, and how device names are built and
// read. Users' CEL selectors, the node (pkg/resourceslices builds the
// devices with it) and the operator's tools (pkg/fleetview, kubectl-gpu,
// which read them back from ResourceSlices) share it.
//
// It imports nothing that needs cgo or NVML (cmd/kubectl-gpu/deps_test.go
// checks): kubectl-gpu, which runs on operators' laptops, builds with
// CGO_ENABLED=0 for any OS.
package deviceattr

import configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"

// Attribute and capacity names. Unqualified names live in the driver's
// domain; they match NVIDIA's reference driver so existing selectors work.
const (
	AttrType                  = "type"
	AttrUUID                  = "uuid"
	AttrIndex                 = "index"
	AttrMinor                 = "minor"
	AttrProductName           = "productName"
	AttrBrand                 = "brand"
	AttrArchitecture          = "architecture"
	AttrCudaComputeCapability = "cudaComputeCapability"
	AttrDriverVersion         = "driverVersion"
	AttrCudaDriverVersion     = "cudaDriverVersion"
	AttrMigCapable            = "migCapable"
	// AttrAddressingMode is how the GPU reaches system memory: "HMM",
	// "ATS" or "None" as NVML names them; absent where NVML does not tell
	// (drivers before R580, GPUs that do not support the query).
	AttrAddressingMode = "addressingMode"

	CapMemory          = "memory"
	CapMultiprocessors = "multiprocessors"
)

// MIG attribute and capacity names.
const (
	AttrParentUUID     = "parentUUID"
	AttrParentMinor    = "parentMinor"
	AttrProfile        = "profile"
	AttrPlacementStart = "placementStart"
	AttrPlacementSize  = "placementSize"

	CapCopyEngines = "copyEngines"
	CapDecoders    = "decoders"
	CapEncoders    = "encoders"
	CapJpegEngines = "jpegEngines"
	CapOfaEngines  = "ofaEngines"
)

// CapComputePercentage is the share of a shareable GPU's SMs a claim may
// ask for; MPS enforces it as the client's active thread percentage.
const CapComputePercentage = "computePercentage"

// AttrIOMMUGroup is the IOMMU group a VM gets a passthrough GPU through.
const AttrIOMMUGroup = "iommuGroup"

// The type attribute's values (configapi.DeviceKind.Attribute).
const (
	TypeGPU = string(configapi.WholeGPU)
	TypeMIG = string(configapi.MIG)
	// TypeMonitor is a GPU's monitor device, for admin-access requests
	// (pkg/resourceslices/monitor.go says why it exists).
	TypeMonitor = string(configapi.Monitor)
	// TypeVFIO is a GPU's passthrough device (docs/passthrough.md).
	TypeVFIO = string(configapi.VFIO)
)
