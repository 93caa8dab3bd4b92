// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"fmt"
	"sort"
)

// OpaqueConfig is one decoded config of this driver in a claim's (at
// admission) or an allocation's (at prepare) config list.
type OpaqueConfig struct {
	// Index is the entry's position in that list, for error messages.
	Index int
	// FromClass is set for configs of a DeviceClass (at prepare only).
	FromClass bool
	// Requests are the requests the entry is aimed at; none means all.
	Requests []string
	Config   Config
}

// From names where the config came from: "DeviceClass" or "claim".
func (c *OpaqueConfig) From() string {
	if c.FromClass {
		return "DeviceClass"
	}
	return "claim"
}

// Configs are a claim's configs of this driver in precedence order, the
// one config resolver both the kubelet plugin (at prepare) and the
// admission webhook use, so that they pick the same config for a request.
type Configs []OpaqueConfig

// InPrecedenceOrder orders configs by precedence: DeviceClass configs
// before claim configs, and within each the order of the list, so that a
// later entry overrides an earlier one. It sorts configs in place.
func InPrecedenceOrder(configs []OpaqueConfig) Configs {
	sort.SliceStable(configs, func(a, b int) bool { return configs[a].FromClass && !configs[b].FromClass })
	return configs
}

// For returns the config that applies to a device of request ("request" or
// "request/subrequest"): the last one whose requests select it
// (SelectsRequest); nil when none does, and the default for the device's
// kind applies (DefaultConfigFor).
func (cs Configs) For(request string) *OpaqueConfig {
	var chosen *OpaqueConfig
	for i := range cs {
		if SelectsRequest(cs[i].Requests, request) {
			chosen = &cs[i]
		}
	}
	return chosen
}

// Resolve returns the config that applies to a device of request and kind
// (For), checked to apply to the kind, normalized and validated; nil, nil
// when no config selects the request. The zero kind ("") means the kind is
// not known (at admission, a request whose class does not pin it), and the
// config is not checked against it. Errors are *ConfigError.
func (cs Configs) Resolve(request string, kind DeviceKind) (*OpaqueConfig, error) {
	chosen := cs.For(request)
	if chosen == nil {
		return nil, nil
	}
	if kind != "" {
		if err := chosen.Config.AppliesTo(kind); err != nil {
			return chosen, &ConfigError{Entry: chosen, Request: request, WrongKind: true, Err: err}
		}
	}
	chosen.Config.Normalize()
	if err := chosen.Config.Validate(); err != nil {
		return chosen, &ConfigError{Entry: chosen, Request: request, Err: err}
	}
	return chosen, nil
}

// ConfigError is a resolved config that cannot be used: of the wrong kind
// for the device (WrongKind), or invalid.
type ConfigError struct {
	Entry     *OpaqueConfig
	Request   string
	WrongKind bool
	Err       error
}

func (e *ConfigError) Error() string {
	where := fmt.Sprintf("devices.config[%d] (from %s)", e.Entry.Index, e.Entry.From())
	if e.WrongKind {
		return fmt.Sprintf("%s for request %q: %v", where, e.Request, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", where, e.Entry.Config.Kind(), e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }
