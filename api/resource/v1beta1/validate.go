// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Normalize fills in defaults. A missing sharing section stays missing:
// the driver then changes nothing on the device, which is safe on every GPU.
func (c *GpuConfig) Normalize() { c.Sharing.normalize() }

// Normalize fills in defaults, as for GpuConfig.
func (c *MigDeviceConfig) Normalize() { c.Sharing.normalize() }

// Validate checks every field of a GpuConfig.
func (c *GpuConfig) Validate() error { return c.Sharing.validate("sharing") }

// Validate checks every field of a MigDeviceConfig.
func (c *MigDeviceConfig) Validate() error { return c.Sharing.validate("sharing") }

// AppliesTo allows GpuConfig on whole GPUs (and monitor devices) only.
func (c *GpuConfig) AppliesTo(k DeviceKind) error {
	if k.ConfigKind() != GpuConfigKind {
		return fmt.Errorf("kind GpuConfig cannot configure a %s device: use kind MigDeviceConfig for MIG devices", k.ConfigType())
	}
	if k == VFIO && c.Sharing != nil {
		// The VM owns the GPU: neither time-slicing nor MPS reaches it.
		return fmt.Errorf("a vfio (passthrough) device goes whole to one virtual machine: leave out sharing")
	}
	return nil
}

// AppliesTo allows MigDeviceConfig on MIG devices only.
func (c *MigDeviceConfig) AppliesTo(k DeviceKind) error {
	if k.ConfigKind() != MigDeviceConfigKind {
		return fmt.Errorf("kind MigDeviceConfig cannot configure a %s device: use kind GpuConfig for whole GPUs", k.ConfigType())
	}
	return nil
}

func (s *Sharing) normalize() {
	if s == nil {
		return
	}
	if s.Strategy == TimeSlicingStrategy {
		if s.TimeSlicingConfig == nil {
			s.TimeSlicingConfig = &TimeSlicingConfig{}
		}
		if s.TimeSlicingConfig.Interval == "" {
			s.TimeSlicingConfig.Interval = DefaultTimeSlice
		}
	}
	if s.Strategy == MpsStrategy && s.MpsConfig == nil {
		s.MpsConfig = &MpsConfig{}
	}
}

func (s *Sharing) validate(path string) error {
	if s == nil {
		return nil
	}
	switch s.Strategy {
	case TimeSlicingStrategy:
		if s.MpsConfig != nil {
			return fmt.Errorf("%s.mpsConfig: not allowed with strategy TimeSlicing; remove it or set strategy: MPS", path)
		}
		return s.TimeSlicingConfig.validate(path + ".timeSlicingConfig")
	case MpsStrategy:
		if s.TimeSlicingConfig != nil {
			return fmt.Errorf("%s.timeSlicingConfig: not allowed with strategy MPS; remove it or set strategy: TimeSlicing", path)
		}
		return s.MpsConfig.validate(path + ".mpsConfig")
	case "":
		return fmt.Errorf("%s.strategy: required; set TimeSlicing or MPS", path)
	default:
		return fmt.Errorf("%s.strategy: unknown strategy %q; use TimeSlicing or MPS", path, s.Strategy)
	}
}

func (t *TimeSlicingConfig) validate(path string) error {
	if t == nil {
		return nil
	}
	switch t.Interval {
	case DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice:
		return nil
	default:
		return fmt.Errorf("%s.interval: unknown interval %q; use Default, Short, Medium or Long", path, t.Interval)
	}
}

func (m *MpsConfig) validate(path string) error {
	if m == nil {
		return nil
	}
	if p := m.DefaultActiveThreadPercentage; p != nil && (*p < 1 || *p > 100) {
		return fmt.Errorf("%s.defaultActiveThreadPercentage: %d is outside 1-100", path, *p)
	}
	if q := m.DefaultPinnedDeviceMemoryLimit; q != nil {
		if err := ValidatePinnedMemoryLimit(path+".defaultPinnedDeviceMemoryLimit", *q); err != nil {
			return err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(m.DefaultPerDevicePinnedMemoryLimit)) {
		field := fmt.Sprintf("%s.defaultPerDevicePinnedMemoryLimit[%q]", path, key)
		if key == "" {
			return fmt.Errorf("%s: empty key; key limits by device index (0, 1, ...) or UUID", field)
		}
		if err := ValidatePinnedMemoryLimit(field, m.DefaultPerDevicePinnedMemoryLimit[key]); err != nil {
			return err
		}
	}
	return nil
}

// MinPinnedMemoryLimit is the smallest pinned-memory limit: MPS takes limits
// in whole MiB, so a smaller one would be applied as 0M, which MPS reads as
// no limit at all. Such a limit is rejected rather than rounded up to 1Mi:
// a limit the user did not write would hide the mistake.
const MinPinnedMemoryLimit = 1 << 20

// maxQuantity is the largest value an int64 holds. Beyond it Value()
// overflows (10E gives 0), and the parser clamps binary quantities such as
// 16Ei to it, so a limit at or beyond it no longer means what was written.
var maxQuantity = resource.NewQuantity(math.MaxInt64, resource.BinarySI)

// ValidatePinnedMemoryLimit checks that a pinned device memory limit is one
// MPS applies as written: positive, at least 1Mi, and within int64 bytes.
// It also checks memory a claim consumes, which becomes such a limit.
func ValidatePinnedMemoryLimit(field string, q resource.Quantity) error {
	switch {
	case q.Sign() <= 0:
		return fmt.Errorf("%s: %s must be positive, e.g. 10Gi", field, q.String())
	case q.Cmp(*maxQuantity) >= 0:
		return fmt.Errorf("%s: %s is larger than any GPU's memory; use the memory a client may pin, e.g. 10Gi", field, q.String())
	case q.Value() < MinPinnedMemoryLimit:
		return fmt.Errorf("%s: %s is below 1Mi, the smallest limit MPS applies (it counts whole MiB); use e.g. 1Gi", field, q.String())
	}
	return nil
}
