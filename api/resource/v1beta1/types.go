// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1beta1 holds the opaque device configuration that claims and
// DeviceClasses pass to this driver (apiVersion resource.nvidia.com/v1beta1).
// The kinds and field names match NVIDIA's reference driver so that existing
// manifests keep working; unknown fields are rejected rather than ignored.
// It also holds the data the driver writes into a claim's device status
// (status.go).
package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// GroupVersion is the apiVersion every config object must carry.
	GroupVersion = "resource.nvidia.com/v1beta1"

	GpuConfigKind       = "GpuConfig"
	MigDeviceConfigKind = "MigDeviceConfig"
)

// Config is implemented by every opaque config kind. Implementations are
// plain structs; callers never have to guess which pointer of a union is set.
type Config interface {
	// Kind returns the config's kind, e.g. "GpuConfig".
	Kind() string
	// Normalize fills in defaults so that Validate and the prepare path see
	// a complete object.
	Normalize()
	// Validate reports the first invalid field, naming it and the fix.
	Validate() error
	// AppliesTo reports whether the config may be applied to a device of
	// the given kind, with an error that says which kind to use instead.
	AppliesTo(k DeviceKind) error
	// GetSharing returns the sharing settings, nil when none were given.
	GetSharing() *Sharing
}

// TypeMeta is the apiVersion/kind header of a config object.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// GpuConfig configures whole GPUs.
type GpuConfig struct {
	TypeMeta `json:",inline"`
	Sharing  *Sharing `json:"sharing,omitempty"`
}

// MigDeviceConfig configures MIG devices.
type MigDeviceConfig struct {
	TypeMeta `json:",inline"`
	Sharing  *Sharing `json:"sharing,omitempty"`
}

// SharingStrategy names how several containers or claims share one device.
type SharingStrategy string

const (
	TimeSlicingStrategy SharingStrategy = "TimeSlicing"
	MpsStrategy         SharingStrategy = "MPS"
)

// Sharing selects a strategy and its settings.
type Sharing struct {
	Strategy          SharingStrategy    `json:"strategy"`
	TimeSlicingConfig *TimeSlicingConfig `json:"timeSlicingConfig,omitempty"`
	MpsConfig         *MpsConfig         `json:"mpsConfig,omitempty"`
}

// TimeSliceInterval is the scheduler time slice NVML applies to a GPU.
type TimeSliceInterval string

const (
	DefaultTimeSlice TimeSliceInterval = "Default"
	ShortTimeSlice   TimeSliceInterval = "Short"
	MediumTimeSlice  TimeSliceInterval = "Medium"
	LongTimeSlice    TimeSliceInterval = "Long"
)

// TimeSlicingConfig holds the time-slicing settings.
type TimeSlicingConfig struct {
	Interval TimeSliceInterval `json:"interval,omitempty"`
}

// MpsConfig holds the settings of the MPS control daemon for a device.
type MpsConfig struct {
	// DefaultActiveThreadPercentage limits the share of SMs each client gets (1-100).
	DefaultActiveThreadPercentage *int `json:"defaultActiveThreadPercentage,omitempty"`
	// DefaultPinnedDeviceMemoryLimit limits the device memory of each client.
	DefaultPinnedDeviceMemoryLimit *resource.Quantity `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
	// DefaultPerDevicePinnedMemoryLimit overrides the memory limit per device,
	// keyed by device index or UUID.
	DefaultPerDevicePinnedMemoryLimit map[string]resource.Quantity `json:"defaultPerDevicePinnedMemoryLimit,omitempty"`
}

func (c *GpuConfig) Kind() string               { return GpuConfigKind }
func (c *GpuConfig) GetSharing() *Sharing       { return c.Sharing }
func (c *MigDeviceConfig) Kind() string         { return MigDeviceConfigKind }
func (c *MigDeviceConfig) GetSharing() *Sharing { return c.Sharing }

// DefaultGpuConfig is applied to a GPU that no config selects.
func DefaultGpuConfig() *GpuConfig {
	return &GpuConfig{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: GpuConfigKind}}
}

// DefaultMigDeviceConfig is applied to a MIG device that no config selects.
func DefaultMigDeviceConfig() *MigDeviceConfig {
	return &MigDeviceConfig{TypeMeta: TypeMeta{APIVersion: GroupVersion, Kind: MigDeviceConfigKind}}
}

// DefaultConfigFor returns the default config for a device kind.
func DefaultConfigFor(k DeviceKind) Config {
	if k.IsMIG() {
		return DefaultMigDeviceConfig()
	}
	return DefaultGpuConfig()
}
