// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// What an admin (or a test) does to a simulated GPU from outside the
// plugin: count instances, reset the GPU, set MIG mode.

package simulate

import (
	"errors"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// MigInstanceCount reports how many GPU instances a simulated GPU holds.
func (s *Simulator) MigInstanceCount(uuid string) int {
	if dev := s.device(uuid); dev != nil {
		return s.mig.instanceCount(dev)
	}
	return 0
}

func (s *Simulator) device(uuid string) *server.Device {
	for _, d := range s.Devices {
		if dev := d.(*server.Device); dev.UUID == uuid {
			return dev
		}
	}
	return nil
}

// ResetGPU resets a GPU as `nvidia-smi --gpu-reset` does: a pending MIG mode
// takes effect (turning MIG mode off removes every MIG instance). It fails
// while another client holds the GPU. The simulator never resets a GPU by
// itself; this is the admin's action.
func (s *Simulator) ResetGPU(uuid string) error {
	dev := s.device(uuid)
	if dev == nil {
		return fmt.Errorf("no simulated GPU %s", uuid)
	}
	if s.inUse(uuid) {
		return errors.New("the GPU is in use by another client")
	}
	m := s.mig
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pending[dev] == nvml.DEVICE_MIG_DISABLE {
		m.dropInstances(dev)
	}
	dev.Lock()
	dev.MigMode = m.pending[dev]
	dev.Unlock()
	s.clearRecovery(uuid) // a reset is the recovery action of an XID (xid_faults.go)
	if ret := m.save(); ret != nvml.SUCCESS {
		return fmt.Errorf("save simulated MIG state: %s", nvml.ErrorString(ret))
	}
	return nil
}

// SetMigModeAsAdmin sets a GPU's MIG mode as an admin does on any GPU:
// nvidia-smi -mig followed, where the GPU needs it, by a reset.
func (s *Simulator) SetMigModeAsAdmin(uuid string, mode int) error {
	dev := s.device(uuid)
	if dev == nil {
		return fmt.Errorf("no simulated GPU %s", uuid)
	}
	activation, ret := dev.SetMigMode(mode)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("set MIG mode: %s", nvml.ErrorString(ret))
	}
	if activation == nvml.SUCCESS {
		return nil
	}
	return s.ResetGPU(uuid)
}

// forgetCI removes what a compute instance leaves outside the mock: its
// MIG device file, capability file and cached handle. The caller removes
// it from its GPU instance.
func (m *migSim) forgetCI(dev *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance) {
	_ = os.Remove(m.migDevicePath(dev, gi))
	m.sim.removeCICap(dev.Minor, int(gi.Info.Id), int(ci.Info.Id))
	m.handlesMu.Lock()
	delete(m.handles, ci)
	m.handlesMu.Unlock()
}

// dropInstances destroys every compute and GPU instance of a GPU with
// their files, as a reset with MIG mode off or a reboot does; the caller
// holds m.mu.
func (m *migSim) dropInstances(dev *server.Device) {
	dev.Lock()
	defer dev.Unlock()
	for gi := range dev.GpuInstances {
		gi.Lock()
		for ci := range gi.ComputeInstances {
			m.forgetCI(dev, gi, ci)
			delete(gi.ComputeInstances, ci)
		}
		gi.Unlock()
		m.sim.removeGICaps(dev.Minor, int(gi.Info.Id))
		delete(dev.GpuInstances, gi)
	}
}
