// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// A monitor device (resourceslices.TypeMonitor) is a GPU published a second
// time, without counters, for admin-access requests: monitoring agents on a
// GPU that runs workloads, MIG devices included. Preparing it gives the
// container the GPU as an admin-access whole GPU gets it, and changes
// nothing: no MIG mode, no MIG devices, no sharing. It never conflicts with
// other claims on its GPU (admin access), and unprepare has nothing to undo
// but the claim's CDI spec and record.

// checkMonitor refuses a monitor device allocated without admin access:
// nothing keeps such an allocation off a GPU that a workload uses. It runs
// while planning, before anything is touched.
func checkMonitor(dev *AllocatableDevice, r resourceapi.DeviceRequestAllocationResult) error {
	if dev.Kind != configapi.Monitor || (r.AdminAccess != nil && *r.AdminAccess) {
		return nil
	}
	return fmt.Errorf("device %s (request %q) is the monitor device of GPU %s, which is only for admin access: "+
		"request it with adminAccess: true, in a namespace labelled resource.kubernetes.io/admin-access: \"true\"; "+
		"for a GPU of the workload's own, use a whole GPU or a MIG device; nothing was prepared", dev.Name, r.Request, dev.GPU.UUID)
}

// checkMonitorSharing refuses a sharing config on a monitor device: its
// claim watches the GPU and changes nothing on it.
func checkMonitorSharing(dev *AllocatableDevice, hasSharing bool) error {
	if dev.Kind != configapi.Monitor || !hasSharing {
		return nil
	}
	return fmt.Errorf("sharing: monitor device %s watches GPU %s and changes nothing on it, sharing included; leave sharing out of its config", dev.Name, dev.GPU.UUID)
}
