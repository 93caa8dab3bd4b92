// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metricname names the Prometheus metrics the kubelet plugin
// exports (pkg/metrics registers them) and their labels, for the tools that
// read them: `gpudra diagnose` (pkg/diagnose) and tests. It is a leaf
// (no imports) so that readers do not link pkg/metrics' dependencies
// (NVML through pkg/nvdev) into, e.g., the admission webhook.
package metricname

// Prefix starts every metric name of the plugin.
const Prefix = "gpu_dra_"

// Metric names.
const (
	PrepareDuration     = Prefix + "prepare_duration_seconds"
	UnprepareDuration   = Prefix + "unprepare_duration_seconds"
	Errors              = Prefix + "errors_total"
	DeviceHealthy       = Prefix + "device_healthy"
	XIDEvents           = Prefix + "xid_events_total"
	DiscoveryFailedGPUs = Prefix + "discovery_failed_gpus_total"
	PreparedDevices     = Prefix + "prepared_devices"
	UnrestoredClaims    = Prefix + "unrestored_claims"
	KubeletRegistered   = Prefix + "kubelet_registered"
	// BuildInfo is 1, labelled with the plugin's LabelVersion,
	// LabelCommit and LabelGoVersion (pkg/version).
	BuildInfo = Prefix + "build_info"

	// Allocation, per GPU (labels LabelGPU, LabelUUID, LabelModel),
	// computed from the prepared claims' records at every scrape.
	// GPUState is 1 for the GPU's current state (LabelState) and 0 for
	// the others, so that "GPUs by state" is a sum.
	GPUState                = Prefix + "gpu_state"
	GPUPreparedClaims       = Prefix + "gpu_prepared_claims"
	GPUMigSlices            = Prefix + "gpu_mig_slices"
	GPUMigSlicesInUse       = Prefix + "gpu_mig_slices_in_use"
	GPUMemoryBytes          = Prefix + "gpu_memory_bytes"
	GPUMemoryAllocatedBytes = Prefix + "gpu_memory_allocated_bytes"
)

// Labels and their values.
const (
	// LabelOperation is the label of Errors: OperationPrepare,
	// OperationUnprepare, OperationBackground or OperationRecovery.
	LabelOperation      = "operation"
	OperationPrepare    = "prepare"
	OperationUnprepare  = "unprepare"
	OperationBackground = "background"
	OperationRecovery   = "recovery"
	// LabelDevice and LabelUUID label DeviceHealthy.
	LabelDevice = "device"
	LabelUUID   = "uuid"
	// LabelXID labels XIDEvents.
	LabelXID = "xid"
	// LabelVersion, LabelCommit and LabelGoVersion label BuildInfo.
	LabelVersion   = "version"
	LabelCommit    = "commit"
	LabelGoVersion = "goversion"

	// LabelGPU (the GPU's minor number), LabelUUID and LabelModel (its
	// product name) label every per-GPU allocation metric.
	LabelGPU   = "gpu"
	LabelModel = "model"

	// LabelState labels GPUState: what the GPU is used as now. A GPU
	// with MIG devices in use is StateMIG, else one with memory-fraction
	// shares StateFraction, else one shared by time-slicing or MPS
	// StateShared, else one held whole StateWhole, else StateFree; a GPU
	// bound to vfio-pci for a VM's claim is StatePassthrough.
	// Admin-access (monitoring) claims do not use a GPU.
	LabelState    = "state"
	StateFree     = "free"
	StateWhole    = "whole"
	StateMIG      = "mig"
	StateShared   = "shared"
	StateFraction = "fraction"
	// StatePassthrough: bound to vfio-pci for a virtual machine.
	StatePassthrough = "passthrough"

	// LabelMode labels GPUPreparedClaims: how each claim holds the GPU.
	LabelMode       = "mode"
	ModeWhole       = "whole"
	ModeMIG         = "mig"
	ModeTimeSlicing = "time-slicing"
	ModeMPS         = "mps"
	ModeFraction    = "fraction"
	ModePassthrough = "passthrough"
)

// States are GPUState's label values, Modes GPUPreparedClaims'; every
// GPU exports one series for each, zeros included, so that graphs over
// time have no gaps.
var (
	States = []string{StateFree, StateWhole, StateMIG, StateShared, StateFraction, StatePassthrough}
	Modes  = []string{ModeWhole, ModeMIG, ModeTimeSlicing, ModeMPS, ModeFraction, ModePassthrough}
)

// All lists every metric name above, for tests and tools that check a
// query against what the plugin exports.
var All = []string{
	PrepareDuration, UnprepareDuration, Errors, DeviceHealthy, XIDEvents, DiscoveryFailedGPUs,
	PreparedDevices, UnrestoredClaims, KubeletRegistered, BuildInfo,
	GPUState, GPUPreparedClaims, GPUMigSlices, GPUMigSlicesInUse, GPUMemoryBytes, GPUMemoryAllocatedBytes,
}
