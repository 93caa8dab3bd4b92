// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// TaintUnhealthy is the key of the taint an unhealthy device carries; its
// value says why ("xid-79", "ecc-dbe", "gpu-lost").
const TaintUnhealthy = "gpu.nvidia.com/unhealthy"

// MaxTaintsPerDevice is the API's limit (resource.k8s.io/v1, 1.37).
const MaxTaintsPerDevice = 16

// WithTaints returns res with taints added to the named devices (by device
// name, in every pool). A pool with a tainted device is split into slices of
// at most MaxDevicesPerSliceWithCounters devices, the API's limit once any
// device in a slice has taints; pools without taints keep their slices.
// res itself is not modified.
func WithTaints(res resourceslice.DriverResources, taints map[string][]resourceapi.DeviceTaint) resourceslice.DriverResources {
	out := resourceslice.DriverResources{Pools: make(map[string]resourceslice.Pool, len(res.Pools))}
	for name, pool := range res.Pools {
		out.Pools[name] = taintPool(pool, taints)
	}
	return out
}

func taintPool(pool resourceslice.Pool, taints map[string][]resourceapi.DeviceTaint) resourceslice.Pool {
	tainted := false
	for _, s := range pool.Slices {
		for _, d := range s.Devices {
			if len(taints[d.Name]) > 0 {
				tainted = true
			}
		}
	}
	if !tainted {
		return pool
	}
	// Device slices are rebuilt: devices in their order, taints added to
	// copies, cut at the lower limit. Counter-only slices stay as they are.
	var template *resourceslice.Slice
	var devices []resourceapi.Device
	var slices []resourceslice.Slice
	for i, s := range pool.Slices {
		if len(s.Devices) == 0 {
			slices = append(slices, s)
			continue
		}
		if template == nil {
			template = &pool.Slices[i]
		}
		for _, d := range s.Devices {
			if add := taints[d.Name]; len(add) > 0 {
				d.Taints = append(append([]resourceapi.DeviceTaint(nil), d.Taints...), add...)
			}
			devices = append(devices, d)
		}
	}
	for _, c := range chunk(devices, MaxDevicesPerSliceWithCounters) {
		s := *template
		s.Devices = c
		slices = append(slices, s)
	}
	pool.Slices = slices
	return pool
}

// validateTaints checks a device's taints as the apiserver does.
func validateTaints(taints []resourceapi.DeviceTaint) error {
	if len(taints) > MaxTaintsPerDevice {
		return fmt.Errorf("%d taints, limit %d", len(taints), MaxTaintsPerDevice)
	}
	for _, t := range taints {
		if errs := content.IsLabelKey(t.Key); len(errs) > 0 {
			return fmt.Errorf("taint key %q: %s", t.Key, strings.Join(errs, "; "))
		}
		if errs := content.IsLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("taint %q value %q: %s", t.Key, t.Value, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone:
		default:
			return fmt.Errorf("taint %q effect %q: use NoSchedule, NoExecute or None", t.Key, t.Effect)
		}
	}
	return nil
}
