// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook is the validating admission webhook for ResourceClaims
// and ResourceClaimTemplates: it rejects an invalid opaque config of this
// driver when the claim is written, instead of when the kubelet prepares
// its pod. It decides with the same code as the kubelet plugin's prepare
// path (api/resource/v1beta1: Decode and the config resolver
// Configs.Resolve), so admission and prepare cannot disagree on a config.
package webhook

import (
	"errors"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// Validator checks the opaque configs of one driver in a claim spec.
type Validator struct {
	// DriverName is the driver whose configs are checked; configs of other
	// drivers pass untouched.
	DriverName string
	// Classes looks up DeviceClasses other than the driver's own two, to
	// learn the device type their selectors pin. May be nil.
	Classes ClassGetter

	gpuClass, migClass, monitorClass string
}

// NewValidator returns a Validator for driverName. The DeviceClasses the
// chart installs are known by name: driverName for GPUs and the same name
// with "gpu." replaced by "mig." for MIG devices (gpu.nvidia.com,
// mig.nvidia.com), and "monitor." before it for monitor devices
// (monitor.gpu.nvidia.com).
func NewValidator(driverName string, classes ClassGetter) *Validator {
	return &Validator{
		DriverName: driverName,
		Classes:    classes,
		gpuClass:   driverName,
		migClass:   strings.Replace(driverName, "gpu.", "mig.", 1),

		monitorClass: MonitorClassName(driverName),
	}
}

// FieldError is one rejected config: the claim's field path and what is
// wrong with it, including the fix.
type FieldError struct {
	Field   string
	Message string
}

func (e FieldError) Error() string { return e.Field + ": " + e.Message }

// request is one request, or one subrequest of a firstAvailable list, as
// configs name it ("request" or "request/subrequest").
type request struct {
	name      string
	class     string
	selectors []resourceapi.DeviceSelector
}

// ValidateSpec checks every config of this driver in spec; path is the
// field path of spec in the object ("spec" for a claim, "spec.spec" for a
// template). It decides as prepare does: every config must decode; the
// config that applies to a request is the last one that selects it; that
// config must fit the request's device type (when the request's class
// tells it) and must be valid once normalized. Requests for monitor
// devices must ask for admin access (monitor.go).
func (v *Validator) ValidateSpec(path string, spec *resourceapi.ResourceClaimSpec) []FieldError {
	errs := v.validateMonitor(path, spec)
	var decoded []configapi.OpaqueConfig
	for i, c := range spec.Devices.Config {
		if c.Opaque == nil || c.Opaque.Driver != v.DriverName {
			continue
		}
		cfg, err := configapi.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			errs = append(errs, FieldError{Field: paramsPath(path, i), Message: err.Error()})
			continue
		}
		decoded = append(decoded, configapi.OpaqueConfig{Index: i, Requests: c.Requests, Config: cfg})
	}
	if len(decoded) == 0 {
		return errs
	}
	configs := configapi.InPrecedenceOrder(decoded)
	validated := map[int]bool{} // one validation error per config is enough
	for _, r := range requests(spec) {
		kind, ok := v.requestType(r.class, r.selectors)
		if !ok {
			kind = "" // not known: the config is not checked against it
		}
		chosen, err := configs.Resolve(r.name, kind)
		if chosen == nil {
			continue // the DeviceClass's config or the default applies
		}
		var ce *configapi.ConfigError
		switch {
		case errors.As(err, &ce) && ce.WrongKind:
			errs = append(errs, FieldError{
				Field:   paramsPath(path, chosen.Index),
				Message: fmt.Sprintf("for request %q (deviceClassName %s): %v", r.name, r.class, ce.Err),
			})
		case errors.As(err, &ce) && !validated[chosen.Index]:
			errs = append(errs, FieldError{
				Field:   paramsPath(path, chosen.Index),
				Message: fmt.Sprintf("%s: %v", chosen.Config.Kind(), ce.Err),
			})
		}
		validated[chosen.Index] = true
	}
	return errs
}

func requests(spec *resourceapi.ResourceClaimSpec) []request {
	var out []request
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil {
			out = append(out, request{name: r.Name, class: r.Exactly.DeviceClassName, selectors: r.Exactly.Selectors})
		}
		for _, sub := range r.FirstAvailable {
			out = append(out, request{name: r.Name + "/" + sub.Name, class: sub.DeviceClassName, selectors: sub.Selectors})
		}
	}
	return out
}

func paramsPath(path string, i int) string {
	return fmt.Sprintf("%s.devices.config[%d].opaque.parameters", path, i)
}
