// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
)

func adminExactly(name, class string, admin *bool) resourceapi.DeviceRequest {
	r := exactly(name, class)
	r.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	r.Exactly.AdminAccess = admin
	return r
}

func TestMonitorNeedsAdminAccess(t *testing.T) {
	const monitor = "monitor.gpu.nvidia.com"
	lister := classes{
		"my-monitors": class("my-monitors", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'monitor'"),
		"any-nvidia":  class("any-nvidia", "device.driver == 'gpu.nvidia.com'"),
	}
	for _, tc := range []struct {
		name string
		reqs []resourceapi.DeviceRequest
		cfgs []resourceapi.DeviceClaimConfiguration
		want []string // substrings, one per error, in order; none: admitted
	}{
		{name: "admin access", reqs: []resourceapi.DeviceRequest{adminExactly("all", monitor, ptr.To(true))}},
		{name: "admin access with a config of this driver", reqs: []resourceapi.DeviceRequest{adminExactly("all", monitor, ptr.To(true))},
			cfgs: []resourceapi.DeviceClaimConfiguration{opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`)}},
		{name: "admin access is not needed for GPUs", reqs: []resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com")}},
		{name: "a class that does not pin the type is left to prepare", reqs: []resourceapi.DeviceRequest{exactly("any", "any-nvidia")}},
		{name: "no admin access", reqs: []resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com"), adminExactly("all", monitor, nil)},
			want: []string{`spec.devices.requests[1].exactly.adminAccess: request "all" asks for a GPU monitor device (deviceClassName monitor.gpu.nvidia.com), which is only for admin access: set adminAccess: true (the namespace needs the label resource.kubernetes.io/admin-access: "true")`}},
		{name: "admin access false", reqs: []resourceapi.DeviceRequest{adminExactly("all", monitor, ptr.To(false))},
			want: []string{`spec.devices.requests[0].exactly.adminAccess: request "all"`}},
		{name: "refused with a config as well", reqs: []resourceapi.DeviceRequest{adminExactly("all", monitor, nil)},
			cfgs: []resourceapi.DeviceClaimConfiguration{opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`)},
			want: []string{`spec.devices.requests[0].exactly.adminAccess`}},
		{name: "a class of the admin's own that pins the monitor type", reqs: []resourceapi.DeviceRequest{exactly("m", "my-monitors")},
			want: []string{`request "m" asks for a GPU monitor device (deviceClassName my-monitors)`}},
		{name: "a request's own selector that pins the monitor type", reqs: []resourceapi.DeviceRequest{func() resourceapi.DeviceRequest {
			r := exactly("m", "any-nvidia")
			r.Exactly.Selectors = lister["my-monitors"].Spec.Selectors
			return r
		}()}, want: []string{`spec.devices.requests[0].exactly.adminAccess: request "m"`}},
		{name: "firstAvailable cannot ask for admin access", reqs: []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
			{Name: "whole", DeviceClassName: "gpu.nvidia.com"}, {Name: "watch", DeviceClassName: monitor}}}},
			want: []string{`spec.devices.requests[0].firstAvailable[1].deviceClassName: subrequest "r/watch" asks for a GPU monitor device (deviceClassName monitor.gpu.nvidia.com), which is only for admin access, and a firstAvailable subrequest cannot ask for admin access: request it with exactly: {deviceClassName: monitor.gpu.nvidia.com, adminAccess: true}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := NewValidator(driver, lister).ValidateSpec("spec", spec(tc.reqs, tc.cfgs...))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d like %q", len(errs), errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d: got %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

// The handler denies a template asking for monitors without admin access,
// naming the field, and admits it with admin access.
func TestHandlerMonitorTemplate(t *testing.T) {
	bad := spec([]resourceapi.DeviceRequest{adminExactly("all", MonitorClassName(driver), nil)})
	resp := serve(t, newHandler(), review(t, admissionv1.Create, bad, nil))
	if resp.Allowed || resp.Result == nil {
		t.Fatalf("monitor request without admin access admitted: %+v", resp)
	}
	if d := resp.Result.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Field != "spec.spec.devices.requests[0].exactly.adminAccess" {
		t.Errorf("causes must name the field: %+v", d)
	}
	good := spec([]resourceapi.DeviceRequest{adminExactly("all", MonitorClassName(driver), ptr.To(true))})
	if resp := serve(t, newHandler(), review(t, admissionv1.Create, good, nil)); !resp.Allowed {
		t.Errorf("monitor request with admin access denied: %+v", resp.Result)
	}
}
