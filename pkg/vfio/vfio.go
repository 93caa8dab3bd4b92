// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package vfio hands a whole GPU to vfio-pci and back, through the files
// the kernel has for it under /sys (Documentation/ABI/testing/sysfs-bus-pci:
// driver_override, drivers/<driver>/bind and unbind; Documentation/
// driver-api/vfio.rst: a device bound to vfio-pci is reached through
// /dev/vfio/<IOMMU group>). It is the driver's only kernel-facing VFIO code.
// Every path is relative to a sysfs root and a /dev root, so that tests and
// the simulator (pkg/simulate/sysfs.go) run it on a directory of their own.
package vfio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Drivers a GPU is bound to.
const (
	DriverNvidia = "nvidia"
	DriverVFIO   = "vfio-pci"
)

// Host is one node's sysfs and /dev.
type Host struct {
	// SysfsRoot is "/sys" on a host.
	SysfsRoot string
	// DevRoot is "/dev" on a host; /dev/vfio/<group> appears under it.
	DevRoot string
	// Write writes one sysfs attribute. Nil writes the file as the kernel
	// expects: opened for writing, never created. The simulator sets its
	// own, which does what the kernel would do on that write.
	Write func(path, value string) error
	// Timeout bounds the waits for /dev/vfio/<group>; 10s when zero.
	Timeout time.Duration
	// WriteTimeout bounds each sysfs write; 30s when zero. A driver's
	// unbind waits in the kernel until every process that has the GPU's
	// device node open closes it (nvidia-persistenced, DCGM): the write
	// can block for as long as they run.
	WriteTimeout time.Duration
}

// pending are the sysfs writes that have not returned from the kernel,
// by path and value. The kernel state they wait on is the host's, so the
// set is too: a write still blocked is never issued a second time.
var pending = struct {
	sync.Mutex
	writes map[string]bool
}{writes: map[string]bool{}}

func (h Host) dev(addr string, elem ...string) string {
	return filepath.Join(append([]string{h.SysfsRoot, "bus", "pci", "devices", addr}, elem...)...)
}

// write writes one sysfs attribute. The kernel's own attributes are
// written with a bound (kernelWrite); a Write of the simulator's, which
// does in process what the kernel would, is called as it is.
func (h Host) write(path, value string) error {
	if h.Write != nil {
		return h.Write(path, value)
	}
	return h.kernelWrite(path, value)
}

// kernelWrite gives up after WriteTimeout. A write that times out stays in
// the kernel (it cannot be cancelled) and finishes when the holder lets
// go; until then the same write is refused at once, so that a caller's
// lock on the GPU is never held for longer than the timeout and retries
// do not pile up. The caller's record says what was intended, and a later
// call resumes from what sysfs says.
func (h Host) kernelWrite(path, value string) error {
	timeout := h.WriteTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	key := path + "\x00" + value
	pending.Lock()
	if pending.writes[key] {
		pending.Unlock()
		return fmt.Errorf("writing %q to %s: an earlier identical write has not returned from the kernel yet; a process that holds the GPU's device node (nvidia-persistenced, DCGM) must let go of it first", strings.TrimSpace(value), path)
	}
	pending.writes[key] = true
	pending.Unlock()
	done := make(chan error, 1)
	go func() {
		defer func() {
			pending.Lock()
			delete(pending.writes, key)
			pending.Unlock()
		}()
		done <- writeFile(path, value)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("writing %q to %s did not return within %s: the kernel waits for a process that holds the GPU's device node (nvidia-persistenced, DCGM); stop it or let it release the GPU, and the next try resumes", strings.TrimSpace(value), path, timeout)
	}
}

// writeFile writes a kernel attribute: opened for writing, never created.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ValidAddress reports whether addr is a PCI address in sysfs form
// ("0000:3b:00.0"); anything else could name another file.
func ValidAddress(addr string) bool {
	if len(addr) != 12 || addr[4] != ':' || addr[7] != ':' || addr[10] != '.' {
		return false
	}
	for i, c := range addr {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Driver is the driver addr is bound to ("" when none).
func (h Host) Driver(addr string) (string, error) {
	if !ValidAddress(addr) {
		return "", fmt.Errorf("%q is not a PCI address", addr)
	}
	if _, err := os.Stat(h.dev(addr)); err != nil {
		return "", fmt.Errorf("PCI device %s: %w", addr, err)
	}
	target, err := os.Readlink(h.dev(addr, "driver"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("PCI device %s: %w", addr, err)
	}
	return filepath.Base(target), nil
}

// Addresses lists the PCI addresses sysfs has devices for
// (bus/pci/devices), sorted: for a caller that knows a device only by
// something derived from its address (NVIDIA's VFIO device UUIDs).
func (h Host) Addresses() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(h.SysfsRoot, "bus", "pci", "devices"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if ValidAddress(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out, nil // ReadDir sorts by name
}

// IOMMUGroup is the IOMMU group of addr. A device without one means the
// IOMMU is off (no intel_iommu=on / amd_iommu=on): vfio-pci cannot take it.
func (h Host) IOMMUGroup(addr string) (string, error) {
	target, err := os.Readlink(h.dev(addr, "iommu_group"))
	if err != nil {
		return "", fmt.Errorf("PCI device %s has no IOMMU group (%w): turn the IOMMU on in the kernel command line (intel_iommu=on or amd_iommu=on, iommu=pt), see docs/passthrough.md", addr, err)
	}
	return filepath.Base(target), nil
}

// GroupDevices lists the PCI addresses in an IOMMU group.
func (h Host) GroupDevices(group string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(h.SysfsRoot, "kernel", "iommu_groups", group, "devices"))
	if err != nil {
		return nil, fmt.Errorf("IOMMU group %s: %w", group, err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out, nil
}

// CheckGroup returns addr's IOMMU group after checking that it holds only
// addr and its own functions (its audio function, say): vfio-pci gives a
// VM the whole group (vfio.rst, "Groups, Devices, and IOMMUs"), so a group
// that also holds a NIC or another GPU would hand those over too.
func (h Host) CheckGroup(addr string) (string, error) {
	group, err := h.IOMMUGroup(addr)
	if err != nil {
		return "", err
	}
	members, err := h.GroupDevices(group)
	if err != nil {
		return "", err
	}
	slot := addr[:len(addr)-2] // domain:bus:device, without the function
	var others []string
	for _, m := range members {
		if !strings.HasPrefix(m, slot+".") {
			others = append(others, m)
		}
	}
	if len(others) > 0 {
		return "", fmt.Errorf("IOMMU group %s of GPU %s also holds %v: passing it through would hand those devices to the VM too; enable ACS or move the GPU to a slot with its own group", group, addr, others)
	}
	return group, nil
}

// Bind binds addr to driver ("nvidia" or "vfio-pci"): driver_override
// names it (so no other driver probes the device in between), the current
// driver lets go, the new one binds. Each write is repeatable, and Bind
// starts from what sysfs says, so calling it again after a crash at any
// point finishes the job.
func (h Host) Bind(addr, driver string) error {
	cur, err := h.Driver(addr)
	if err != nil {
		return err
	}
	override := driver
	if driver == DriverNvidia {
		// An empty override (a newline) hands the device back to the
		// normal match on vendor and device IDs.
		override = "\n"
	}
	if err := h.write(h.dev(addr, "driver_override"), override); err != nil {
		return fmt.Errorf("PCI device %s: set driver_override: %w", addr, err)
	}
	if cur == driver {
		return nil
	}
	if cur != "" {
		if err := h.write(filepath.Join(h.SysfsRoot, "bus", "pci", "drivers", cur, "unbind"), addr); err != nil {
			return fmt.Errorf("PCI device %s: unbind from %s: %w", addr, cur, err)
		}
	}
	if err := h.write(filepath.Join(h.SysfsRoot, "bus", "pci", "drivers", driver, "bind"), addr); err != nil {
		return fmt.Errorf("PCI device %s: bind to %s (is the %s module loaded?): %w", addr, driver, driver, err)
	}
	now, err := h.Driver(addr)
	if err != nil {
		return err
	}
	if now != driver {
		return fmt.Errorf("PCI device %s: bound to %q after binding it to %s", addr, now, driver)
	}
	return nil
}

// GroupNode is /dev/vfio/<group> under the host's /dev.
func (h Host) GroupNode(group string) string { return filepath.Join(h.DevRoot, "vfio", group) }

// WaitGroupNode waits for /dev/vfio/<group>: udev creates it after
// vfio-pci binds, not at once.
func (h Host) WaitGroupNode(group string) error {
	timeout := h.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(h.GroupNode(group)); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s after binding to vfio-pci", h.GroupNode(group), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
