// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package schedfeatures holds the one list of the DRA features the
// scheduler's allocator runs with here, for the tests' scheduler
// (internal/schedtest) and for the operator's answers (pkg/diagnose,
// pkg/fleetview) alike. It imports nothing of this module, so the
// admission webhook and the kubectl plugin link it without NVML.
package schedfeatures

import "k8s.io/dynamic-resource-allocation/structured"

// Features are the DRA features on by default in Kubernetes 1.37
// (kubernetes pkg/features/kube_features.go: DRAAdminAccess,
// DRAConsumableCapacity, DRADeviceBindingConditions, DRADeviceTaints,
// DRAPartitionableDevices, DRAPrioritizedList).
var Features = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}
