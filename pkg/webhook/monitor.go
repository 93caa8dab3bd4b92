// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// monitorType is the type attribute of a GPU's monitor device
// (deviceattr.TypeMonitor): the GPU, published without counters, for
// admin-access requests only.
var monitorType = configapi.Monitor.Attribute()

// MonitorClassName is the DeviceClass of monitor devices the chart
// installs for a driver: "monitor.gpu.nvidia.com".
func MonitorClassName(driverName string) string { return "monitor." + driverName }

// validateMonitor refuses requests for monitor devices that do not ask for
// admin access. A monitor device is a whole GPU that counters do not
// protect: without admin access the scheduler could hand it out beside a
// workload on the same GPU. Subrequests of firstAvailable cannot ask for
// admin access at all, so a monitor there is always refused. The plugin
// refuses such an allocation again at prepare.
func (v *Validator) validateMonitor(path string, spec *resourceapi.ResourceClaimSpec) []FieldError {
	var errs []FieldError
	for i, r := range spec.Devices.Requests {
		reqPath := fmt.Sprintf("%s.devices.requests[%d]", path, i)
		if e := r.Exactly; e != nil && v.asksForMonitor(e.DeviceClassName, e.Selectors) && (e.AdminAccess == nil || !*e.AdminAccess) {
			errs = append(errs, FieldError{
				Field: reqPath + ".exactly.adminAccess",
				Message: fmt.Sprintf("request %q asks for a GPU monitor device (deviceClassName %s), which is only for admin access: "+
					"set adminAccess: true (the namespace needs the label resource.kubernetes.io/admin-access: \"true\"), "+
					"or use deviceClassName %s for a GPU of the workload's own", r.Name, e.DeviceClassName, v.gpuClass),
			})
		}
		for j, sub := range r.FirstAvailable {
			if v.asksForMonitor(sub.DeviceClassName, sub.Selectors) {
				errs = append(errs, FieldError{
					Field: fmt.Sprintf("%s.firstAvailable[%d].deviceClassName", reqPath, j),
					Message: fmt.Sprintf("subrequest %q asks for a GPU monitor device (deviceClassName %s), which is only for admin access, "+
						"and a firstAvailable subrequest cannot ask for admin access: request it with "+
						"exactly: {deviceClassName: %s, adminAccess: true}", r.Name+"/"+sub.Name, sub.DeviceClassName, v.monitorClass),
				})
			}
		}
	}
	return errs
}

// asksForMonitor reports whether a request (or subrequest) can only get
// monitor devices: it names the monitor class, or its class's or its own
// selectors pin this driver's type to "monitor".
func (v *Validator) asksForMonitor(class string, selectors []resourceapi.DeviceSelector) bool {
	if class == v.monitorClass {
		return true
	}
	if v.Classes != nil {
		if dc, err := v.Classes.Get(class); err == nil && dc != nil && pinsMonitor(v.DriverName, dc.Spec.Selectors) {
			return true
		}
	}
	return pinsMonitor(v.DriverName, selectors)
}

// pinsMonitor reports whether a selector compares this driver's type with
// "monitor" and could not be satisfied otherwise (no `||`, negation or
// conditional in it).
func pinsMonitor(driver string, selectors []resourceapi.DeviceSelector) bool {
	for _, s := range selectors {
		if s.CEL == nil {
			continue
		}
		expr := s.CEL.Expression
		if strings.ContainsAny(expr, "|!?") {
			continue
		}
		for _, m := range typeComparison.FindAllStringSubmatch(expr, -1) {
			d, t := m[1], m[2]
			if d == "" {
				d, t = m[4], m[3]
			}
			if d == driver && t == monitorType {
				return true
			}
		}
	}
	return false
}
