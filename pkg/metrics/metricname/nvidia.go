// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metricname

// NVIDIA's reference driver's names for the same series (issue 58, item
// 5): its kubelet plugin exports them (pkg/metrics/dra_requests.go of
// kubernetes-sigs/dra-driver-nvidia-gpu, 95932046), so that dashboards and
// alerts written for it keep working after the switch. pkg/metrics exports
// each as an alias of one of ours, read from it at every scrape.
const (
	NVIDIAPrefix = "nvidia_dra_"

	// NVIDIARequests counts prepare and unprepare requests (LabelDriver,
	// LabelOperation): PrepareDuration's and UnprepareDuration's counts.
	NVIDIARequests = NVIDIAPrefix + "requests_total"
	// NVIDIARequestDuration is PrepareDuration and UnprepareDuration as one
	// histogram (LabelDriver, LabelOperation), with their buckets.
	NVIDIARequestDuration = NVIDIAPrefix + "request_duration_seconds"
	// NVIDIAPreparedDevices is PreparedDevices by NVIDIA's device type
	// (LabelNode, LabelDriver, LabelDeviceType).
	NVIDIAPreparedDevices = NVIDIAPrefix + "prepared_devices"
	// NVIDIANodePrepareErrors and NVIDIANodeUnprepareErrors are Errors of
	// OperationPrepare and OperationUnprepare (LabelDriver,
	// LabelErrorType).
	NVIDIANodePrepareErrors   = NVIDIAPrefix + "node_prepare_errors_total"
	NVIDIANodeUnprepareErrors = NVIDIAPrefix + "node_unprepare_errors_total"
)

// NVIDIA's labels and their values, spelled as its driver spells them.
const (
	LabelDriver     = "driver"
	LabelNode       = "node"
	LabelDeviceType = "device_type"
	LabelErrorType  = "error_type"

	// NVIDIA's device types: a whole GPU (this driver's monitor devices
	// and memory shares too), a MIG device (static or dynamic), a GPU
	// passed through to a VM; DeviceTypeUnknown for anything else.
	DeviceTypeGPU     = "gpu"
	DeviceTypeMIG     = "mig"
	DeviceTypeVFIO    = "vfio"
	DeviceTypeUnknown = "unknown"

	// ErrorTypePrepareDevices and ErrorTypeUnprepareDevices are NVIDIA's
	// error types for a claim that failed to prepare or unprepare: every
	// failure this driver counts in Errors of those operations is one.
	ErrorTypePrepareDevices   = "prepare_devices"
	ErrorTypeUnprepareDevices = "unprepare_devices"
)

// NVIDIADeviceTypes are NVIDIAPreparedDevices' label values; each is
// exported, zeros included, as NVIDIA's driver does.
var NVIDIADeviceTypes = []string{DeviceTypeGPU, DeviceTypeMIG, DeviceTypeVFIO, DeviceTypeUnknown}

// NVIDIAAll lists NVIDIA's names the plugin exports. NVIDIA's
// nvidia_dra_requests_inflight has no counterpart here: the plugin does
// not track requests in flight.
var NVIDIAAll = []string{
	NVIDIARequests, NVIDIARequestDuration, NVIDIAPreparedDevices, NVIDIANodePrepareErrors, NVIDIANodeUnprepareErrors,
}
