// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"regexp"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// ClassGetter returns a DeviceClass by name. An informer's lister fits; nil
// errors and nil classes both mean "not known".
type ClassGetter interface {
	Get(name string) (*resourceapi.DeviceClass, error)
}

// typeComparison finds `device.attributes['<driver>'].type == '<t>'` (or
// ["type"], or with the operands swapped) in a CEL selector: the form the
// chart's DeviceClasses use, and the one NVIDIA's documentation shows.
var typeComparison = regexp.MustCompile(
	`device\.attributes\[\s*["']([^"']+)["']\s*\](?:\.type|\[\s*["']type["']\s*\])\s*==\s*["']([a-z]+)["']` +
		`|["']([a-z]+)["']\s*==\s*device\.attributes\[\s*["']([^"']+)["']\s*\](?:\.type|\[\s*["']type["']\s*\])`)

// pinnedType returns the device type that CEL selectors pin for this
// driver, when every one of them that compares the type names the same one
// and none could be satisfied otherwise (an `||` or a negation might). It
// errs on the side of "unknown": the plugin checks again at prepare, so a
// type missed here is only a later error, while a wrong one would deny a
// valid claim.
func pinnedType(driver string, selectors []resourceapi.DeviceSelector) (configapi.DeviceKind, bool) {
	var found configapi.DeviceKind
	for _, s := range selectors {
		if s.CEL == nil {
			continue
		}
		expr := s.CEL.Expression
		matches := typeComparison.FindAllStringSubmatch(expr, -1)
		if len(matches) == 0 {
			continue
		}
		if strings.Contains(expr, "||") || strings.Contains(expr, "!") || strings.Contains(expr, "?") {
			return "", false
		}
		for _, m := range matches {
			d, t := m[1], m[2]
			if d == "" {
				d, t = m[4], m[3]
			}
			if d != driver {
				continue
			}
			// "gpu" and "mig" are the attributes of WholeGPU and of (static
			// or dynamic) MIG devices, the two kinds configs tell apart.
			dt := configapi.DeviceKind(t)
			if dt != configapi.WholeGPU && dt != configapi.MIG {
				return "", false
			}
			if found != "" && found != dt {
				return "", false // unsatisfiable; the scheduler will say so
			}
			found = dt
		}
	}
	return found, found != ""
}

// requestType returns the device type a request (or subrequest) asks for:
// from the class name when it is one of the chart's two classes, else from
// the class's selectors, else from the request's own selectors.
func (v *Validator) requestType(class string, selectors []resourceapi.DeviceSelector) (configapi.DeviceKind, bool) {
	switch class {
	case v.gpuClass:
		return configapi.WholeGPU, true
	case v.migClass:
		return configapi.MIG, true
	}
	if v.Classes != nil {
		if dc, err := v.Classes.Get(class); err == nil && dc != nil {
			if t, ok := pinnedType(v.DriverName, dc.Spec.Selectors); ok {
				return t, true
			}
		}
	}
	return pinnedType(v.DriverName, selectors)
}
