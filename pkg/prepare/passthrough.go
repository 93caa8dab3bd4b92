// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Passthrough (docs/passthrough.md). Preparing a vfio device binds its GPU
// to vfio-pci; unpreparing it binds the GPU back to nvidia and waits until
// NVML sees it again, and only then is the record (which holds the GPU for
// every other device of it: exclusive.go) deleted.
//
// Crash safety: every sysfs step is preceded by a record that names the
// binding the claim wants (checkpoint.VfioRecord.Driver): "vfio-pci" in
// the PrepareStarted record before the first write of prepare, "nvidia"
// in a PrepareStarted record before the first write of unprepare. vfio.Bind
// starts from what sysfs says and each of its writes is repeatable, so a
// start after a kill at any step binds the GPU as the record says: a
// started record is rolled back (to nvidia) by RecoverLocal, a prepared
// one restored (to vfio-pci: configuredAway finds it elsewhere, after a
// reboot for one).

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

// vfioRecord is the record of a passthrough device before any work: the
// binding it wants, and the GPU as NVML describes it now, which a
// restarted plugin publishes while NVML cannot see it.
func vfioRecord(dev *AllocatableDevice) *checkpoint.VfioRecord {
	g := *dev.GPU
	g.Device = nil
	return &checkpoint.VfioRecord{PCIBusID: dev.GPU.PCIBusID, IOMMUGroup: dev.GPU.IOMMUGroup, Driver: vfio.DriverVFIO, GPU: &g}
}

// bindVFIO hands the GPU to vfio-pci. The caller holds the GPU's lock and
// has reserved it (no other claim holds any device of it).
func (s *State) bindVFIO(rec *checkpoint.PreparedDevice, dev *AllocatableDevice) error {
	pt := s.Passthrough
	if pt == nil || rec.Vfio == nil {
		return fmt.Errorf("this node offers no GPU for passthrough (--passthrough-gpus)")
	}
	addr := rec.Vfio.PCIBusID
	cur, err := pt.Host.Driver(addr)
	if err != nil {
		return err
	}
	if cur == vfio.DriverNvidia && dev.GPU.Device != nil {
		if err := idle(dev.GPU.Device); err != nil {
			return fmt.Errorf("GPU %s: %w", addr, err)
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

// unbindVFIO binds the GPU back to nvidia and waits until NVML sees it;
// the GPU's handle in the device table is the new one from then on. It is
// idempotent and needs nothing but the record: the GPU may no longer be
// published.
func (s *State) unbindVFIO(rec checkpoint.PreparedDevice) error {
	pt := s.Passthrough
	if pt == nil {
		return fmt.Errorf("GPU %s is recorded as passed through, but passthrough is off on this node: bind it to nvidia by hand or turn --passthrough-gpus on again", rec.Vfio.PCIBusID)
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
			for _, d := range s.Devices {
				if d.GPU.UUID == rec.UUID {
					d.GPU.Device = h // the GPU lock is held; every device of it shares this GPU
					break
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GPU %s is bound to nvidia again but NVML does not see it after %s: %s", rec.Vfio.PCIBusID, timeout, nvml.ErrorString(ret))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// markUnbinding records, before unprepare's first sysfs write, that the
// claim's GPUs are to go back to nvidia: a start after a kill from here on
// rolls the claim back instead of restoring it. rec is updated.
func (s *State) markUnbinding(rec *checkpoint.PreparedClaim) error {
	changed := false
	for i := range rec.Devices {
		if v := rec.Devices[i].Vfio; v != nil && (v.Driver != vfio.DriverNvidia || rec.State != checkpoint.PrepareStarted) {
			v.Driver = vfio.DriverNvidia
			changed = true
		}
	}
	if !changed {
		return nil
	}
	rec.State = checkpoint.PrepareStarted
	return s.Store.Put(*rec)
}

// vfioAway reports whether a prepared passthrough device's GPU is not on
// vfio-pci (a reboot, or someone rebound it): restore binds it again.
func (s *State) vfioAway(d checkpoint.PreparedDevice) bool {
	if d.Vfio == nil || d.Vfio.Driver != vfio.DriverVFIO || s.Passthrough == nil {
		return false
	}
	cur, err := s.Passthrough.Host.Driver(d.Vfio.PCIBusID)
	return err != nil || cur != vfio.DriverVFIO
}

// isVFIO reports whether a held device is a passthrough device: it
// conflicts with every other device of its GPU, admin access included
// (NVML cannot watch a GPU a VM owns).
func isVFIO(h heldDevice) bool { return h.dev != nil && h.dev.Kind == configapi.VFIO }
