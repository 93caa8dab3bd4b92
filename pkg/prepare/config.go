// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// opaqueConfig is one decoded config entry of an allocation.
type opaqueConfig struct {
	index    int
	source   resourceapi.AllocationConfigSource
	requests []string
	config   configapi.Config
}

// decodeConfigs returns this driver's configs in precedence order:
// DeviceClass configs before claim configs, and within each the order of
// the claim, so that a later entry overrides an earlier one. Configs for
// other drivers are ignored.
func decodeConfigs(driverName string, configs []resourceapi.DeviceAllocationConfiguration) ([]opaqueConfig, error) {
	var out []opaqueConfig
	for i, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != driverName {
			continue
		}
		cfg, err := configapi.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("devices.config[%d] (from %s): %w", i, describeSource(c.Source), err)
		}
		out = append(out, opaqueConfig{index: i, source: c.Source, requests: c.Requests, config: cfg})
	}
	sort.SliceStable(out, func(a, b int) bool {
		return out[a].source == resourceapi.AllocationConfigSourceClass && out[b].source != resourceapi.AllocationConfigSourceClass
	})
	return out, nil
}

func describeSource(s resourceapi.AllocationConfigSource) string {
	if s == resourceapi.AllocationConfigSourceClass {
		return "DeviceClass"
	}
	return "claim"
}

// configFor picks the config that applies to one allocated device (the last
// matching one) or the default for its type, then normalizes and validates
// it for that device.
func configFor(configs []opaqueConfig, request string, t configapi.DeviceType) (configapi.Config, error) {
	var chosen *opaqueConfig
	for i := range configs {
		if matchesRequest(configs[i].requests, request) {
			chosen = &configs[i]
		}
	}
	if chosen == nil {
		return configapi.DefaultConfigFor(t), nil
	}
	cfg := chosen.config
	where := fmt.Sprintf("devices.config[%d] (from %s)", chosen.index, describeSource(chosen.source))
	if err := cfg.AppliesTo(t); err != nil {
		return nil, fmt.Errorf("%s for request %q: %w", where, request, err)
	}
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, cfg.Kind(), err)
	}
	return cfg, nil
}

// matchesRequest reports whether a config's request list selects the
// allocated request, which may be "request/subrequest".
func matchesRequest(requests []string, request string) bool {
	return configapi.SelectsRequest(requests, request)
}

// checkConfigs checks what configs say about the claim as a whole, once
// every device is planned: each request a claim config names exists, and
// each per-device limit key selects a device. Either mistake would
// otherwise be ignored silently, and the device run without the setting.
func checkConfigs(claim *resourceapi.ResourceClaim, configs []opaqueConfig, planned []plannedDevice) error {
	if err := checkConfigRequests(claim, configs); err != nil {
		return err
	}
	return checkPerDeviceKeys(configs, planned)
}

// checkConfigRequests reports a request name in a claim config that is no
// request of the claim ("request" or "request/subrequest"). The scheduler
// sets the requests of DeviceClass configs itself, so those are not checked.
func checkConfigRequests(claim *resourceapi.ResourceClaim, configs []opaqueConfig) error {
	var names []string
	for _, r := range claim.Spec.Devices.Requests {
		names = append(names, r.Name)
		for _, sub := range r.FirstAvailable {
			names = append(names, r.Name+"/"+sub.Name)
		}
	}
	for _, c := range configs {
		if c.source == resourceapi.AllocationConfigSourceClass {
			continue
		}
		for j, r := range c.requests {
			if !slices.Contains(names, r) {
				known := "it has none"
				if len(names) > 0 {
					known = "its requests are " + strings.Join(names, ", ")
				}
				return fmt.Errorf("devices.config[%d].requests[%d]: %q is not a request of claim %s/%s; %s", c.index, j, r, claim.Namespace, claim.Name, known)
			}
		}
	}
	return nil
}

// checkPerDeviceKeys reports a defaultPerDevicePinnedMemoryLimit key that
// selects none of the devices its config applies to. A key need only match
// one of them: a key for device 1 is no error while device 0 is planned.
func checkPerDeviceKeys(configs []opaqueConfig, planned []plannedDevice) error {
	for _, c := range configs {
		sh := c.config.GetSharing()
		if sh == nil || sh.MpsConfig == nil || len(sh.MpsConfig.DefaultPerDevicePinnedMemoryLimit) == 0 {
			continue
		}
		var valid []string
		for i, p := range planned {
			// configFor hands out the config itself, so identity tells
			// which devices it applies to.
			if p.config == c.config {
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
					c.index, describeSource(c.source), c.config.Kind(), key, strings.Join(valid, ", "))
			}
		}
	}
	return nil
}
