// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devkind

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Passthrough (docs/passthrough.md). Preparing a vfio device binds its GPU
// to vfio-pci; unpreparing it binds the GPU back to nvidia and waits until
// NVML sees it again, and only then is the record (which holds the GPU for
// every other device of it: pkg/ledger) deleted.
//
// Crash safety: every sysfs step is preceded by a record that names the
// binding the claim wants (checkpoint.VfioRecord.Driver): "vfio-pci" in
// the PrepareStarted record before the first write of prepare, "nvidia"
// in a PrepareStarted record before the first write of unprepare. vfio.Bind
// starts from what sysfs says and each of its writes is repeatable, so a
// start after a kill at any step binds the GPU as the record says: a
// started record is rolled back (to nvidia) by RecoverLocal, a prepared
// one restored (to vfio-pci: StillConfigured finds it elsewhere, after a
// reboot for one).
//
// Identity by UUID: a GPU is bound or bound back at the address NVML
// reports for its UUID; a recorded address is acted on alone only when it
// was read from the live GPU in this boot (Env.AddrTrusted), since a reboot
// can renumber the buses.

// PassthroughConfig wires passthrough on a node that offers it.
type PassthroughConfig struct {
	Host vfio.Host
	// Lookup finds a GPU in NVML by UUID; it fails while the GPU is not
	// bound to nvidia.
	Lookup func(uuid string) (nvml.Device, nvml.Return)
	// Timeout bounds the wait for NVML to see a GPU again after it is
	// bound to nvidia; 30s when zero.
	Timeout time.Duration
}

// passthrough is a GPU handed to a VM: bound to vfio-pci at prepare and
// back to nvidia at unprepare. It conflicts with every other device of its
// GPU, admin access included (NVML cannot watch a GPU a VM owns).
type passthrough struct{ noops }

// Record is the record of a passthrough device before any work: the
// binding it wants, and the GPU as NVML describes it now, which a
// restarted plugin publishes while NVML cannot see it.
func (passthrough) Record(rec *checkpoint.PreparedDevice, dev *Device) {
	g := *dev.GPU
	g.Device = nil
	rec.Vfio = &checkpoint.VfioRecord{PCIBusID: dev.GPU.PCIBusID, IOMMUGroup: dev.GPU.IOMMUGroup, Driver: vfio.DriverVFIO, GPU: &g}
}

func (passthrough) Matches(rec checkpoint.PreparedDevice, dev *Device) error {
	if rec.Vfio == nil {
		return fmt.Errorf("the node now publishes %s as a VM's GPU, not as the recorded device", dev.Name)
	}
	return sameGPU(rec, dev)
}

func (passthrough) Describe(d *cdi.Device, rec checkpoint.PreparedDevice, _ *Device) {
	if v := rec.Vfio; v != nil {
		d.VFIO = &cdi.VFIO{PCIBusID: v.PCIBusID, IOMMUGroup: v.IOMMUGroup}
	}
}

func (passthrough) Memory(dev *Device) int64 { return int64(dev.GPU.MemoryBytes) }

func (passthrough) ShareTarget(dev *Device) string { return dev.GPU.UUID }

func (passthrough) Watch(pool string, dev *Device) health.Device { return watchGPU(pool, dev) }

// Configure hands the claim's GPU to vfio-pci. The caller holds the GPU's
// lock and the ledger holds the GPU for the claim (no other claim holds
// any device of it).
func (passthrough) Configure(env Env, rec *checkpoint.PreparedDevice, dev *Device) error {
	pt, addrTrusted := env.Passthrough, env.AddrTrusted
	if pt == nil || rec.Vfio == nil {
		return fmt.Errorf("this node offers no GPU for passthrough (--passthrough-gpus)")
	}
	addr := rec.Vfio.PCIBusID
	h, ret := pt.Lookup(rec.UUID)
	switch {
	case ret == nvml.SUCCESS:
		live, err := busID(h)
		if err != nil {
			return fmt.Errorf("GPU %s: %w", rec.UUID, err)
		}
		if live != addr {
			return fmt.Errorf("GPU %s is at PCI address %s, not at the recorded %s: the buses were renumbered; it is bound only at the address NVML reports", rec.UUID, live, addr)
		}
		if err := idle(h); err != nil {
			return fmt.Errorf("GPU %s: %w", addr, err)
		}
		// A VM gets the GPU whole, like a whole-GPU claim: MIG mode off
		// (or turned off now, when it holds no MIG device).
		if len(dev.GPU.MigProfiles) > 0 {
			if err := mig.RequireMigDisabled(h, dev.GPU.MigProfiles); err != nil {
				return fmt.Errorf("GPU %s: %w", addr, err)
			}
		}
	case !addrTrusted:
		return fmt.Errorf("GPU %s is not visible to NVML (%s) and its recorded PCI address %s is of an earlier boot: it is not bound to vfio-pci on that address alone", rec.UUID, nvml.ErrorString(ret), addr)
	default:
		// Not on nvidia: bound by this claim earlier in this boot (a
		// restart mid-prepare), or by nobody (the GPU is lost).
		cur, err := pt.Host.Driver(addr)
		if err != nil {
			return err
		}
		if cur != vfio.DriverVFIO && cur != "" {
			return fmt.Errorf("GPU %s is not visible to NVML (%s) and PCI device %s is bound to %q", rec.UUID, nvml.ErrorString(ret), addr, cur)
		}
	}
	group, err := pt.Host.CheckGroup(addr)
	if err != nil {
		return err
	}
	if err := pt.Host.Bind(addr, vfio.DriverVFIO); err != nil {
		return err
	}
	rec.Vfio.IOMMUGroup = group
	return pt.Host.WaitGroupNode(group)
}

// Locate makes a VM device's recorded PCI address the one NVML
// reports now for the device's GPU (by UUID), before anything is bound: a
// reboot can renumber the buses (a card added or moved). It fails when
// NVML does not see the GPU, which after a reboot means it is lost.
func (passthrough) Locate(env Env, d *checkpoint.PreparedDevice) error {
	if d.Vfio == nil {
		return nil
	}
	if env.Passthrough == nil {
		return fmt.Errorf("GPU %s is recorded as passed through, but passthrough is off on this node", d.UUID)
	}
	h, ret := env.Passthrough.Lookup(d.UUID)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU %s is not visible to NVML (%s): its PCI address cannot be confirmed", d.UUID, nvml.ErrorString(ret))
	}
	addr, err := busID(h)
	if err != nil {
		return fmt.Errorf("GPU %s: %w", d.UUID, err)
	}
	d.Vfio.PCIBusID = addr
	if d.Vfio.GPU != nil {
		g := *d.Vfio.GPU
		g.PCIBusID = addr
		d.Vfio.GPU = &g
	}
	return nil
}

// busID is a GPU's PCI address in sysfs form.
func busID(h nvml.Device) (string, error) {
	pci, ret := h.GetPciInfo()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("get PCI info: %s", nvml.ErrorString(ret))
	}
	b := make([]byte, 0, len(pci.BusId))
	for _, c := range pci.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	addr := nvdev.NormalizePCIBusID(string(b))
	if !vfio.ValidAddress(addr) {
		return "", fmt.Errorf("NVML reports PCI address %q", addr)
	}
	return addr, nil
}

// idle fails when a process runs on the GPU: unbinding the driver under it
// would kill its work (a monitoring agent outside Kubernetes, say).
func idle(d nvml.Device) error {
	var pids []uint32
	for _, list := range []func() ([]nvml.ProcessInfo, nvml.Return){d.GetComputeRunningProcesses, d.GetGraphicsRunningProcesses} {
		procs, ret := list()
		if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
			return fmt.Errorf("list the processes on it: %s", nvml.ErrorString(ret))
		}
		for _, p := range procs {
			pids = append(pids, p.Pid)
		}
	}
	if len(pids) > 0 {
		return fmt.Errorf("processes %v use it; stop them before passing the GPU through", pids)
	}
	return nil
}

// Release binds the claim's GPU back to nvidia and waits until NVML
// sees it; the GPU's handle in the device table is the new one from then
// on. It needs nothing but the record (the GPU may no longer be published)
// and is idempotent. The recorded address is acted on only when it was
// read from the live GPU in this boot (addrTrusted) and the GPU is not
// back on nvidia already: after a reboot that renumbered the buses it may
// name another GPU. A GPU gone from sysfs has nothing left to bind.
func (passthrough) Release(env Env, rec checkpoint.PreparedDevice, _ *Device) error {
	pt, addrTrusted := env.Passthrough, env.AddrTrusted
	if pt == nil {
		return fmt.Errorf("GPU %s is recorded as passed through, but passthrough is off on this node: bind it to nvidia by hand or turn --passthrough-gpus on again", rec.Vfio.PCIBusID)
	}
	if h, ret := pt.Lookup(rec.UUID); ret == nvml.SUCCESS {
		setHandle(env.Devices, rec.UUID, h) // back on nvidia already (a reboot, or an earlier attempt)
		return nil
	}
	if !addrTrusted {
		// Not on nvidia, and where it is is unknown: lost, or on a bus a
		// reboot renumbered. Nothing is done at an address that may be
		// another GPU's; start destroys nothing of a GPU that comes back.
		return nil
	}
	if _, err := pt.Host.Driver(rec.Vfio.PCIBusID); errors.Is(err, fs.ErrNotExist) {
		return nil // gone from the bus: nothing to bind back
	}
	if err := pt.Host.Bind(rec.Vfio.PCIBusID, vfio.DriverNvidia); err != nil {
		return err
	}
	timeout := pt.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		h, ret := pt.Lookup(rec.UUID)
		if ret == nvml.SUCCESS {
			setHandle(env.Devices, rec.UUID, h)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GPU %s is bound to nvidia again but NVML does not see it after %s: %s", rec.Vfio.PCIBusID, timeout, nvml.ErrorString(ret))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setHandle gives every published device of a GPU the GPU's new NVML
// handle; the caller holds the GPU's lock.
func setHandle(devices map[string]*Device, uuid string, h nvml.Device) {
	for _, d := range devices {
		if d.GPU.UUID == uuid {
			d.GPU.Device = h // every device of a GPU shares its *nvdev.GPU
			return
		}
	}
}

// StillConfigured reports whether a prepared passthrough device's GPU is
// still on vfio-pci; not after a reboot, or when someone rebound it:
// restore binds it again.
func (passthrough) StillConfigured(env Env, d checkpoint.PreparedDevice, _ *Device) bool {
	if d.Vfio == nil || d.Vfio.Driver != vfio.DriverVFIO || env.Passthrough == nil {
		return true
	}
	if _, ret := env.Passthrough.Lookup(d.UUID); ret == nvml.SUCCESS {
		return false // NVML sees it: it is on nvidia, wherever it sits
	}
	cur, err := env.Passthrough.Host.Driver(d.Vfio.PCIBusID)
	return err == nil && cur == vfio.DriverVFIO
}

// Rebuild: the GPU itself, for a VM.
func (passthrough) Rebuild(rec checkpoint.PreparedDevice, g *nvdev.GPU, partitionable bool, _ *Device) (*Device, error) {
	return &Device{Name: rec.Device, Kind: configapi.VFIO, GPU: g, Partitionable: partitionable}, nil
}
