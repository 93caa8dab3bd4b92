// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"fmt"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// readOnlyNVML wraps an NVML library so that nothing reached through it can
// change a GPU: MIG mode and instances, compute mode, persistence mode,
// clocks, power limit, ECC, accounting. Such calls fail with
// NO_PERMISSION, as for an unprivileged process, and are recorded, so the
// smoke test (gpudra smoke prepare) can prove it changed nothing. Every
// device, GPU instance and compute instance handle it returns is wrapped
// the same way.
type readOnlyNVML struct {
	nvml.Interface
	r *Refusals
}

// Refusals records the calls a read-only NVML refused.
type Refusals struct {
	mu    sync.Mutex
	calls map[string]int
}

// Refuse records one refused call and returns NO_PERMISSION. Stand-ins
// for other tools that would change a GPU (time slices, MPS daemons) use
// it to report their refusals in the same list.
func (r *Refusals) Refuse(what string) nvml.Return {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[what]++
	return nvml.ERROR_NO_PERMISSION
}

// List returns the refused calls, "name xN", sorted.
func (r *Refusals) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for c, n := range r.calls {
		out = append(out, fmt.Sprintf("%s x%d", c, n))
	}
	sort.Strings(out)
	return out
}

// NewReadOnly wraps lib so that every call that would change a GPU is
// refused (NO_PERMISSION) and recorded in the returned Refusals.
func NewReadOnly(lib nvml.Interface) (nvml.Interface, *Refusals) {
	r := &Refusals{}
	return &readOnlyNVML{Interface: lib, r: r}, r
}

func (l *readOnlyNVML) dev(d nvml.Device, ret nvml.Return) (nvml.Device, nvml.Return) {
	if d == nil {
		return d, ret
	}
	if _, ok := d.(roDevice); ok {
		return d, ret
	}
	return roDevice{Device: d, r: l.r}, ret
}

func (l *readOnlyNVML) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return l.dev(l.Interface.DeviceGetHandleByIndex(i))
}
func (l *readOnlyNVML) DeviceGetHandleByUUID(u string) (nvml.Device, nvml.Return) {
	return l.dev(l.Interface.DeviceGetHandleByUUID(u))
}
func (l *readOnlyNVML) DeviceGetHandleByPciBusId(b string) (nvml.Device, nvml.Return) {
	return l.dev(l.Interface.DeviceGetHandleByPciBusId(b))
}
func (l *readOnlyNVML) DeviceGetHandleBySerial(s string) (nvml.Device, nvml.Return) {
	return l.dev(l.Interface.DeviceGetHandleBySerial(s))
}

// The library-level forms of the device calls below.
func (l *readOnlyNVML) DeviceSetMigMode(nvml.Device, int) (nvml.Return, nvml.Return) {
	return nvml.ERROR_NO_PERMISSION, l.r.Refuse("SetMigMode")
}
func (l *readOnlyNVML) DeviceCreateGpuInstance(nvml.Device, *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
	return nil, l.r.Refuse("CreateGpuInstance")
}
func (l *readOnlyNVML) DeviceCreateGpuInstanceWithPlacement(nvml.Device, *nvml.GpuInstanceProfileInfo, *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	return nil, l.r.Refuse("CreateGpuInstanceWithPlacement")
}
func (l *readOnlyNVML) GpuInstanceDestroy(nvml.GpuInstance) nvml.Return {
	return l.r.Refuse("GpuInstance.Destroy")
}
func (l *readOnlyNVML) GpuInstanceCreateComputeInstance(nvml.GpuInstance, *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	return nil, l.r.Refuse("CreateComputeInstance")
}
func (l *readOnlyNVML) ComputeInstanceDestroy(nvml.ComputeInstance) nvml.Return {
	return l.r.Refuse("ComputeInstance.Destroy")
}
func (l *readOnlyNVML) DeviceSetComputeMode(nvml.Device, nvml.ComputeMode) nvml.Return {
	return l.r.Refuse("SetComputeMode")
}
func (l *readOnlyNVML) DeviceSetPersistenceMode(nvml.Device, nvml.EnableState) nvml.Return {
	return l.r.Refuse("SetPersistenceMode")
}

type roDevice struct {
	nvml.Device
	r *Refusals
}

func (d roDevice) wrap(x nvml.Device, ret nvml.Return) (nvml.Device, nvml.Return) {
	if x == nil {
		return x, ret
	}
	return roDevice{Device: x, r: d.r}, ret
}

func (d roDevice) gi(g nvml.GpuInstance) nvml.GpuInstance {
	if g == nil {
		return nil
	}
	return roGpuInstance{GpuInstance: g, r: d.r}
}

func (d roDevice) SetMigMode(int) (nvml.Return, nvml.Return) {
	return nvml.ERROR_NO_PERMISSION, d.r.Refuse("SetMigMode")
}
func (d roDevice) CreateGpuInstance(*nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
	return nil, d.r.Refuse("CreateGpuInstance")
}
func (d roDevice) CreateGpuInstanceWithPlacement(*nvml.GpuInstanceProfileInfo, *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	return nil, d.r.Refuse("CreateGpuInstanceWithPlacement")
}
func (d roDevice) SetComputeMode(nvml.ComputeMode) nvml.Return { return d.r.Refuse("SetComputeMode") }
func (d roDevice) SetPersistenceMode(nvml.EnableState) nvml.Return {
	return d.r.Refuse("SetPersistenceMode")
}
func (d roDevice) SetGpuLockedClocks(uint32, uint32) nvml.Return {
	return d.r.Refuse("SetGpuLockedClocks")
}
func (d roDevice) ResetGpuLockedClocks() nvml.Return { return d.r.Refuse("ResetGpuLockedClocks") }
func (d roDevice) SetMemoryLockedClocks(uint32, uint32) nvml.Return {
	return d.r.Refuse("SetMemoryLockedClocks")
}
func (d roDevice) ResetMemoryLockedClocks() nvml.Return {
	return d.r.Refuse("ResetMemoryLockedClocks")
}
func (d roDevice) SetApplicationsClocks(uint32, uint32) nvml.Return {
	return d.r.Refuse("SetApplicationsClocks")
}
func (d roDevice) ResetApplicationsClocks() nvml.Return {
	return d.r.Refuse("ResetApplicationsClocks")
}
func (d roDevice) SetPowerManagementLimit(uint32) nvml.Return {
	return d.r.Refuse("SetPowerManagementLimit")
}
func (d roDevice) SetEccMode(nvml.EnableState) nvml.Return { return d.r.Refuse("SetEccMode") }
func (d roDevice) ClearEccErrorCounts(nvml.EccCounterType) nvml.Return {
	return d.r.Refuse("ClearEccErrorCounts")
}
func (d roDevice) SetGpuOperationMode(nvml.GpuOperationMode) nvml.Return {
	return d.r.Refuse("SetGpuOperationMode")
}
func (d roDevice) SetAccountingMode(nvml.EnableState) nvml.Return {
	return d.r.Refuse("SetAccountingMode")
}
func (d roDevice) ClearAccountingPids() nvml.Return { return d.r.Refuse("ClearAccountingPids") }
func (d roDevice) SetAutoBoostedClocksEnabled(nvml.EnableState) nvml.Return {
	return d.r.Refuse("SetAutoBoostedClocksEnabled")
}
func (d roDevice) SetDefaultAutoBoostedClocksEnabled(nvml.EnableState, uint32) nvml.Return {
	return d.r.Refuse("SetDefaultAutoBoostedClocksEnabled")
}
func (d roDevice) SetAPIRestriction(nvml.RestrictedAPI, nvml.EnableState) nvml.Return {
	return d.r.Refuse("SetAPIRestriction")
}

func (d roDevice) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	return d.wrap(d.Device.GetMigDeviceHandleByIndex(i))
}
func (d roDevice) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	return d.wrap(d.Device.GetDeviceHandleFromMigDeviceHandle())
}
func (d roDevice) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	g, ret := d.Device.GetGpuInstanceById(id)
	return d.gi(g), ret
}
func (d roDevice) GetGpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	gs, ret := d.Device.GetGpuInstances(info)
	return wrapAll(gs, d.gi), ret
}

type roGpuInstance struct {
	nvml.GpuInstance
	r *Refusals
}

func (g roGpuInstance) ci(c nvml.ComputeInstance) nvml.ComputeInstance {
	if c == nil {
		return nil
	}
	return roComputeInstance{ComputeInstance: c, r: g.r}
}

func (g roGpuInstance) Destroy() nvml.Return { return g.r.Refuse("GpuInstance.Destroy") }
func (g roGpuInstance) CreateComputeInstance(*nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	return nil, g.r.Refuse("CreateComputeInstance")
}
func (g roGpuInstance) CreateComputeInstanceWithPlacement(*nvml.ComputeInstanceProfileInfo, *nvml.ComputeInstancePlacement) (nvml.ComputeInstance, nvml.Return) {
	return nil, g.r.Refuse("CreateComputeInstanceWithPlacement")
}
func (g roGpuInstance) GetInfo() (nvml.GpuInstanceInfo, nvml.Return) {
	info, ret := g.GpuInstance.GetInfo()
	if info.Device != nil {
		info.Device = roDevice{Device: info.Device, r: g.r}
	}
	return info, ret
}
func (g roGpuInstance) GetComputeInstanceById(id int) (nvml.ComputeInstance, nvml.Return) {
	c, ret := g.GpuInstance.GetComputeInstanceById(id)
	return g.ci(c), ret
}
func (g roGpuInstance) GetComputeInstances(info *nvml.ComputeInstanceProfileInfo) ([]nvml.ComputeInstance, nvml.Return) {
	cs, ret := g.GpuInstance.GetComputeInstances(info)
	return wrapAll(cs, g.ci), ret
}

// wrapAll wraps each handle of a list NVML returned.
func wrapAll[T any](xs []T, wrap func(T) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = wrap(x)
	}
	return out
}

type roComputeInstance struct {
	nvml.ComputeInstance
	r *Refusals
}

func (c roComputeInstance) Destroy() nvml.Return { return c.r.Refuse("ComputeInstance.Destroy") }
func (c roComputeInstance) GetInfo() (nvml.ComputeInstanceInfo, nvml.Return) {
	info, ret := c.ComputeInstance.GetInfo()
	if info.Device != nil {
		info.Device = roDevice{Device: info.Device, r: c.r}
	}
	if info.GpuInstance != nil {
		info.GpuInstance = roGpuInstance{GpuInstance: info.GpuInstance, r: c.r}
	}
	return info, ret
}
