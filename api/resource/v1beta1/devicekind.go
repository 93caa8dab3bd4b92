// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

// DeviceKind is the kind of a device this driver publishes: what preparing
// it involves, which config kind applies to it and the `type` attribute it
// is published with. The device table (pkg/resourceslices), prepare, the
// checkpoint record and the admission webhook all use this one type.
//
// Its values are strings. WholeGPU ("gpu") and MIG ("mig") are also what
// configs and checkpoint records call a device (ConfigType): a record's
// `type` is "gpu" for whole GPUs and monitor devices and "mig" for every
// MIG device. The values of DynamicMIG and Monitor are never written to a
// record or a ResourceSlice: those take ConfigType and Attribute.
type DeviceKind string

const (
	// WholeGPU is a GPU used as a whole (possibly shared by memory
	// fraction).
	WholeGPU DeviceKind = "gpu"
	// MIG is a MIG device an admin created (static); it is used as it is.
	// Configs and checkpoint records name every MIG device so.
	MIG DeviceKind = "mig"
	// DynamicMIG is a MIG placement created at prepare and destroyed at
	// unprepare.
	DynamicMIG DeviceKind = "dynamic-mig"
	// Monitor is a GPU's monitor device: the GPU, for admin access only;
	// preparing it changes nothing.
	Monitor DeviceKind = "monitor"
	// VFIO is a whole GPU handed to a virtual machine: prepare binds it to
	// vfio-pci, unprepare back to nvidia. It is published beside the GPU's
	// other devices (docs/passthrough.md) and configured by GpuConfig,
	// which may not ask for sharing on it.
	VFIO DeviceKind = "vfio"
)

// IsMIG reports whether the device is a MIG device, static or dynamic.
func (k DeviceKind) IsMIG() bool { return k == MIG || k == DynamicMIG }

// ConfigType is the kind configs are checked against and checkpoint records
// hold: MIG for MIG devices, WholeGPU for whole GPUs, monitor devices and
// passthrough (VFIO) devices; a record tells a passthrough device by its
// vfio field (pkg/checkpoint).
func (k DeviceKind) ConfigType() DeviceKind {
	if k.IsMIG() {
		return MIG
	}
	return WholeGPU
}

// ConfigKind is the config kind that applies to the device:
// MigDeviceConfig for MIG devices, GpuConfig for the others.
func (k DeviceKind) ConfigKind() string {
	if k.IsMIG() {
		return MigDeviceConfigKind
	}
	return GpuConfigKind
}

// Attribute is the value of the `type` attribute the device is published
// with: "gpu", "mig" (static and dynamic), "monitor" or "vfio".
func (k DeviceKind) Attribute() string {
	if k == Monitor || k == VFIO {
		return string(k)
	}
	return string(k.ConfigType())
}
