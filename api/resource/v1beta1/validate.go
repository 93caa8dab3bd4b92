package v1beta1

import (
	"fmt"
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

// AppliesTo allows GpuConfig on whole GPUs only.
func (c *GpuConfig) AppliesTo(t DeviceType) error {
	if t != GpuDeviceType {
		return fmt.Errorf("kind GpuConfig cannot configure a %s device: use kind MigDeviceConfig for MIG devices", t)
	}
	return nil
}

// AppliesTo allows MigDeviceConfig on MIG devices only.
func (c *MigDeviceConfig) AppliesTo(t DeviceType) error {
	if t != MigDeviceType {
		return fmt.Errorf("kind MigDeviceConfig cannot configure a %s device: use kind GpuConfig for whole GPUs", t)
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
	if q := m.DefaultPinnedDeviceMemoryLimit; q != nil && q.Sign() <= 0 {
		return fmt.Errorf("%s.defaultPinnedDeviceMemoryLimit: %s must be positive, e.g. 10Gi", path, q.String())
	}
	for key, q := range m.DefaultPerDevicePinnedMemoryLimit {
		if q.Sign() <= 0 {
			return fmt.Errorf("%s.defaultPerDevicePinnedMemoryLimit[%q]: %s must be positive, e.g. 10Gi", path, key, q.String())
		}
	}
	return nil
}
