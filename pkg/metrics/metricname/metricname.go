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
)
