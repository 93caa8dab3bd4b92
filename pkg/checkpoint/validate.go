// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"fmt"
	"regexp"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// MaxFileSize caps what Open reads of one record. A claim with 128 devices
// records about 64 KiB; a larger file is damage, and reading it whole
// could push the plugin over its memory limit at every start.
const MaxFileSize = 1 << 20

// tokenPattern is what a UID or a device UUID may look like. Both end up
// in file and directory names (checkpoint files, CDI spec names, MPS
// daemon directories), so a value read from disk must never be able to
// name "..", a path separator or the empty string.
var tokenPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// bootIDPattern is a boot ID as the kernel prints it (a UUID), or any
// short run of hex digits and dashes.
var bootIDPattern = regexp.MustCompile(`^[0-9A-Fa-f-]{1,64}$`)

// dnsLabel is a DRA device name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// iommuGroup is an IOMMU group number.
var iommuGroup = regexp.MustCompile(`^[0-9]{1,9}$`)

// ValidToken reports whether s is safe to use as one path element.
func ValidToken(s string) bool { return tokenPattern.MatchString(s) && s != "." && s != ".." }

// Validate checks a record read from disk (or about to be written) for
// everything later code relies on. A record that fails it is treated as
// damaged: moved aside, never acted on.
func (c *PreparedClaim) Validate() error {
	if !ValidToken(string(c.UID)) {
		return fmt.Errorf("uid %q is not a valid claim UID", c.UID)
	}
	if c.State != PrepareStarted && c.State != PrepareCompleted && c.State != RestorePending {
		return fmt.Errorf("state %q is none of %s, %s and %s", c.State, PrepareStarted, PrepareCompleted, RestorePending)
	}
	if len(c.Namespace) > 253 || len(c.Name) > 253 {
		return fmt.Errorf("namespace or name longer than 253 characters")
	}
	if c.BootID != "" && !bootIDPattern.MatchString(c.BootID) {
		return fmt.Errorf("bootID %q is not a boot ID (at most 64 hex digits and dashes)", c.BootID)
	}
	seen := make(map[string]bool, len(c.Devices))
	for i := range c.Devices {
		d := &c.Devices[i]
		if err := d.validate(c.State == PrepareCompleted); err != nil {
			return fmt.Errorf("devices[%d]: %w", i, err)
		}
		if seen[d.Device] {
			return fmt.Errorf("devices[%d]: device %s is listed twice", i, d.Device)
		}
		seen[d.Device] = true
	}
	return nil
}

func (d *PreparedDevice) validate(completed bool) error {
	if !dnsLabel.MatchString(d.Device) {
		return fmt.Errorf("device %q is not a valid device name", d.Device)
	}
	// A dynamic MIG device has no UUID until it is created, so only a
	// started record may lack one.
	if d.UUID != "" || completed {
		if !ValidToken(d.UUID) {
			return fmt.Errorf("device %s: uuid %q is not a valid device UUID", d.Device, d.UUID)
		}
	}
	if m := d.Mig; m != nil {
		if m.ParentUUID != "" && !ValidToken(m.ParentUUID) {
			return fmt.Errorf("device %s: parentUUID %q is not a valid GPU UUID", d.Device, m.ParentUUID)
		}
		if completed && m.Dynamic && (m.GIID < 0 || m.CIID < 0) {
			return fmt.Errorf("device %s: a prepared dynamic MIG device needs its GPU and compute instance IDs", d.Device)
		}
	}
	if v := d.Vfio; v != nil {
		// The address and group name sysfs paths (pkg/vfio).
		if !vfio.ValidAddress(v.PCIBusID) || (v.IOMMUGroup != "" && !iommuGroup.MatchString(v.IOMMUGroup)) {
			return fmt.Errorf("device %s: vfio address %q or IOMMU group %q is malformed", d.Device, v.PCIBusID, v.IOMMUGroup)
		}
		if v.Driver != vfio.DriverVFIO && v.Driver != vfio.DriverNvidia {
			return fmt.Errorf("device %s: vfio driver %q is neither vfio-pci nor nvidia", d.Device, v.Driver)
		}
		if v.GPU != nil && v.GPU.UUID != d.UUID {
			return fmt.Errorf("device %s: vfio GPU %q is not the device's GPU %q", d.Device, v.GPU.UUID, d.UUID)
		}
	}
	if sh := d.Sharing; sh != nil {
		if sh.Strategy != configapi.TimeSlicingStrategy && sh.Strategy != configapi.MpsStrategy {
			return fmt.Errorf("device %s: sharing strategy %q is unknown", d.Device, sh.Strategy)
		}
		if (sh.Target != "" || completed) && !ValidToken(sh.Target) {
			return fmt.Errorf("device %s: sharing target %q is not a valid device UUID", d.Device, sh.Target)
		}
		if sh.ActiveThreadPercentage < 0 || sh.ActiveThreadPercentage > 100 || sh.PinnedMemoryBytes < 0 {
			return fmt.Errorf("device %s: sharing limits out of range", d.Device)
		}
	}
	return nil
}

// DeepCopy returns a record that shares no memory with c, so that the
// store's copy and a caller's copy never alias. Fields that are values
// (strings such as BootID, numbers) are copied with the struct.
func (c PreparedClaim) DeepCopy() PreparedClaim {
	out := c
	if c.Devices != nil {
		out.Devices = make([]PreparedDevice, len(c.Devices))
		for i, d := range c.Devices {
			d.Requests = append([]string(nil), d.Requests...)
			d.CDIDeviceIDs = append([]string(nil), d.CDIDeviceIDs...)
			if d.Mig != nil {
				m := *d.Mig
				d.Mig = &m
			}
			if d.Sharing != nil {
				s := *d.Sharing
				d.Sharing = &s
			}
			if d.Vfio != nil {
				v := *d.Vfio
				if v.GPU != nil {
					g := *v.GPU // read-only once recorded; a shallow copy will do
					v.GPU = &g
				}
				d.Vfio = &v
			}
			out.Devices[i] = d
		}
	}
	return out
}
