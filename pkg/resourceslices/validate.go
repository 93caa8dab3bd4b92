// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/blang/semver/v4"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// Limits of the resource.k8s.io/v1 API (Kubernetes 1.37).
const (
	MaxDevicesPerSlice             = 128
	MaxDevicesPerSliceWithCounters = 64 // when any device has taints or consumes counters
	MaxCounterSetsPerSlice         = 8
	MaxCountersPerSet              = 32
	MaxAttributesAndCapacities     = 32
	MaxIDLength                    = 32
	MaxStringValueLength           = 64
)

// Validate checks driver resources against the rules the apiserver
// enforces, so that a bad slice is caught in tests and at start instead of
// being rejected asynchronously by the apiserver.
func Validate(res resourceslice.DriverResources) error {
	for poolName, pool := range res.Pools {
		if errs := validation.IsDNS1123Subdomain(poolName); len(errs) > 0 {
			return fmt.Errorf("pool %q: %s", poolName, strings.Join(errs, "; "))
		}
		seen := map[string]bool{}
		counterSets := map[string]resourceapi.CounterSet{}
		for i, s := range pool.Slices {
			if len(s.SharedCounters) > 0 && len(s.Devices) > 0 {
				return fmt.Errorf("pool %q slice %d: devices and shared counters must be in separate slices", poolName, i)
			}
			if len(s.SharedCounters) > MaxCounterSetsPerSlice {
				return fmt.Errorf("pool %q slice %d: %d counter sets, limit %d", poolName, i, len(s.SharedCounters), MaxCounterSetsPerSlice)
			}
			for _, cs := range s.SharedCounters {
				if err := validateCounterSet(cs); err != nil {
					return fmt.Errorf("pool %q slice %d: %w", poolName, i, err)
				}
				counterSets[cs.Name] = cs
			}
			limit := MaxDevicesPerSlice
			for _, d := range s.Devices {
				if len(d.ConsumesCounters) > 0 || len(d.Taints) > 0 {
					limit = MaxDevicesPerSliceWithCounters
				}
			}
			if len(s.Devices) > limit {
				return fmt.Errorf("pool %q slice %d: %d devices, limit %d", poolName, i, len(s.Devices), limit)
			}
			for _, d := range s.Devices {
				if seen[d.Name] {
					return fmt.Errorf("pool %q: duplicate device %q", poolName, d.Name)
				}
				seen[d.Name] = true
				if err := validateDevice(d); err != nil {
					return fmt.Errorf("pool %q device %q: %w", poolName, d.Name, err)
				}
			}
		}
		for _, s := range pool.Slices {
			for _, d := range s.Devices {
				if err := validateConsumption(d, counterSets); err != nil {
					return fmt.Errorf("pool %q device %q: %w", poolName, d.Name, err)
				}
			}
		}
	}
	return nil
}

func validateCounterSet(cs resourceapi.CounterSet) error {
	if errs := validation.IsDNS1123Label(cs.Name); len(errs) > 0 {
		return fmt.Errorf("counter set %q: %s", cs.Name, strings.Join(errs, "; "))
	}
	if len(cs.Counters) > MaxCountersPerSet {
		return fmt.Errorf("counter set %q: %d counters, limit %d", cs.Name, len(cs.Counters), MaxCountersPerSet)
	}
	for name := range cs.Counters {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("counter set %q: counter %q: %s", cs.Name, name, strings.Join(errs, "; "))
		}
	}
	return nil
}

func validateConsumption(d resourceapi.Device, sets map[string]resourceapi.CounterSet) error {
	for _, c := range d.ConsumesCounters {
		set, ok := sets[c.CounterSet]
		if !ok {
			return fmt.Errorf("consumes unknown counter set %q", c.CounterSet)
		}
		for name, v := range c.Counters {
			have, ok := set.Counters[name]
			if !ok {
				return fmt.Errorf("consumes unknown counter %q of set %q", name, c.CounterSet)
			}
			if v.Value.Cmp(have.Value) > 0 {
				return fmt.Errorf("consumes %s of counter %q, set %q only has %s", v.Value.String(), name, c.CounterSet, have.Value.String())
			}
		}
	}
	return nil
}

func validateDevice(d resourceapi.Device) error {
	if errs := validation.IsDNS1123Label(d.Name); len(errs) > 0 {
		return fmt.Errorf("name: %s", strings.Join(errs, "; "))
	}
	if err := validateTaints(d.Taints); err != nil {
		return err
	}
	if n := len(d.Attributes) + len(d.Capacity); n > MaxAttributesAndCapacities {
		return fmt.Errorf("%d attributes and capacities, limit %d", n, MaxAttributesAndCapacities)
	}
	for name, a := range d.Attributes {
		if err := validateQualifiedName(string(name)); err != nil {
			return fmt.Errorf("attribute %w", err)
		}
		set := 0
		if a.StringValue != nil {
			set++
			if len(*a.StringValue) > MaxStringValueLength {
				return fmt.Errorf("attribute %q: string longer than %d", name, MaxStringValueLength)
			}
		}
		if a.VersionValue != nil {
			set++
			if _, err := semver.Parse(*a.VersionValue); err != nil {
				return fmt.Errorf("attribute %q: %q is not semver: %w", name, *a.VersionValue, err)
			}
		}
		if a.IntValue != nil {
			set++
		}
		if a.BoolValue != nil {
			set++
		}
		if set != 1 {
			return fmt.Errorf("attribute %q: exactly one value must be set, got %d", name, set)
		}
	}
	for name := range d.Capacity {
		if err := validateQualifiedName(string(name)); err != nil {
			return fmt.Errorf("capacity %w", err)
		}
	}
	return nil
}

// validateQualifiedName checks "<domain>/<id>" or "<id>".
func validateQualifiedName(name string) error {
	id := name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		domain := name[:i]
		id = name[i+1:]
		if errs := validation.IsDNS1123Subdomain(domain); len(errs) > 0 {
			return fmt.Errorf("%q: domain: %s", name, strings.Join(errs, "; "))
		}
	}
	return validateIdentifier(id)
}

func validateIdentifier(id string) error {
	if len(id) == 0 || len(id) > MaxIDLength {
		return fmt.Errorf("%q: must be 1-%d characters", id, MaxIDLength)
	}
	if errs := content.IsCIdentifier(id); len(errs) > 0 {
		return fmt.Errorf("%q: %s", id, strings.Join(errs, "; "))
	}
	return nil
}
