// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// adminAccessLabel is the namespace label the API server requires for a
// request with adminAccess: true.
const adminAccessLabel = `resource.kubernetes.io/admin-access: "true"`

// monitorClass is the DeviceClass of the driver's monitor devices
// (deployments/helm/gpu-dra-driver/templates/deviceclass-monitor.yaml):
// one counter-free device per GPU, for admin access only.
func (c *cluster) monitorClass() string { return deviceattr.TypeMonitor + "." + c.snap.DriverName }

// monitorWithoutAdmin explains a request for the monitor class that does
// not ask for admin access: the chart's admission policy refuses such a
// claim, and the plugin refuses to prepare one.
func (c *cluster) monitorWithoutAdmin(r RequestReport) string {
	return fmt.Sprintf("request %q asks for DeviceClass %s, whose monitor devices are only for admin access: set exactly.adminAccess: true "+
		"(the namespace needs the label %s; a firstAvailable subrequest cannot ask for admin access), or use DeviceClass %s for a GPU of your own",
		r.Name, c.monitorClass(), adminAccessLabel, c.snap.DriverName)
}

// adminCountersOnly reports whether an admin-access request is short of
// devices only because of shared counters: nothing tainted, no shared GPU
// full. Devices other claims hold do not block admin access.
func (r RequestReport) adminCountersOnly() bool {
	return r.AdminAccess && r.CounterBlocked > 0 && r.Tainted == 0 && r.CapacityFull == 0
}

// adminCountersAdvice is what to do about an admin-access request blocked
// by shared counters: waiting would only help once the GPUs run nothing,
// the monitor class works now.
func (c *cluster) adminCountersAdvice(r RequestReport) string {
	msg := "Admin access may get devices that other claims hold, but the scheduler's allocator (Kubernetes 1.37 and 1.38) still checks and reserves their shared counters " +
		"(kubernetes/kubernetes#140729, open), so this request stays Pending as long as these GPUs run workloads. "
	class := c.monitorClass()
	msg += fmt.Sprintf("Instead of DeviceClass %s, request DeviceClass %s with adminAccess: true: one counter-free monitor device per GPU, "+
		"which admin access gets whatever runs on the GPU", r.Class, class)
	if c.snap.class(class) == nil {
		msg += fmt.Sprintf(" (DeviceClass %s does not exist in this cluster: install a driver chart that ships it)", class)
	}
	return msg
}
