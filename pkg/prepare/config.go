// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// decodeConfigs returns this driver's configs in precedence order
// (configapi.InPrecedenceOrder). Configs for other drivers are ignored.
func decodeConfigs(driverName string, configs []resourceapi.DeviceAllocationConfiguration) (configapi.Configs, error) {
	var out []configapi.OpaqueConfig
	for i, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != driverName {
			continue
		}
		entry := configapi.OpaqueConfig{Index: i, FromClass: c.Source == resourceapi.AllocationConfigSourceClass, Requests: c.Requests}
		cfg, err := configapi.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("devices.config[%d] (from %s): %w", i, entry.From(), err)
		}
		entry.Config = cfg
		out = append(out, entry)
	}
	return configapi.InPrecedenceOrder(out), nil
}

// configFor returns the config that applies to one allocated device
// (configapi.Configs.Resolve: normalized and validated for the device's
// kind), or the default for its kind when none does.
func configFor(configs configapi.Configs, request string, k configapi.DeviceKind) (configapi.Config, error) {
	chosen, err := configs.Resolve(request, k)
	if err != nil {
		return nil, err
	}
	if chosen == nil {
		return configapi.DefaultConfigFor(k), nil
	}
	return chosen.Config, nil
}

// checkConfigs checks what configs say about the claim as a whole, once
// every device is planned: each request a claim config names exists, and
// each per-device limit key selects a device. Either mistake would
// otherwise be ignored silently, and the device run without the setting.
func checkConfigs(claim *resourceapi.ResourceClaim, configs configapi.Configs, planned []plannedDevice) error {
	if err := checkConfigRequests(claim, configs); err != nil {
		return err
	}
	return checkPerDeviceKeys(configs, planned)
}

// checkConfigRequests reports a request name in a claim config that is no
// request of the claim ("request" or "request/subrequest"). The scheduler
// sets the requests of DeviceClass configs itself, so those are not checked.
func checkConfigRequests(claim *resourceapi.ResourceClaim, configs configapi.Configs) error {
	var names []string
	for _, r := range claim.Spec.Devices.Requests {
		names = append(names, r.Name)
		for _, sub := range r.FirstAvailable {
			names = append(names, r.Name+"/"+sub.Name)
		}
	}
	for _, c := range configs {
		if c.FromClass {
			continue
		}
		for j, r := range c.Requests {
			if !slices.Contains(names, r) {
				known := "it has none"
				if len(names) > 0 {
					known = "its requests are " + strings.Join(names, ", ")
				}
				return fmt.Errorf("devices.config[%d].requests[%d]: %q is not a request of claim %s/%s; %s", c.Index, j, r, claim.Namespace, claim.Name, known)
			}
		}
	}
	return nil
}

// checkPerDeviceKeys reports a defaultPerDevicePinnedMemoryLimit key that
// selects none of the devices its config applies to. A key need only match
// one of them: a key for device 1 is no error while device 0 is planned.
func checkPerDeviceKeys(configs configapi.Configs, planned []plannedDevice) error {
	for _, c := range configs {
		sh := c.Config.GetSharing()
		if sh == nil || sh.MpsConfig == nil || len(sh.MpsConfig.DefaultPerDevicePinnedMemoryLimit) == 0 {
			continue
		}
		var valid []string
		for i, p := range planned {
			// configFor hands out the config itself, so identity tells
			// which devices it applies to.
			if p.config == c.Config {
				valid = append(valid, perDeviceKeys(p.device, i)...)
			}
		}
		if len(valid) == 0 {
			continue // overridden for every device: none of it applies
		}
		slices.Sort(valid)
		for _, key := range slices.Sorted(maps.Keys(sh.MpsConfig.DefaultPerDevicePinnedMemoryLimit)) {
			if !slices.Contains(valid, key) {
				return fmt.Errorf("devices.config[%d] (from %s): %s: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[%q]: matches no device this config applies to; keys are a device's index in the claim or its UUID: %s",
					c.Index, c.From(), c.Config.Kind(), key, strings.Join(valid, ", "))
			}
		}
	}
	return nil
}
