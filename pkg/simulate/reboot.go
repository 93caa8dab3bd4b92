// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Reboot does to the simulated GPUs what a reboot of the node does to real
// ones:
//
//   - Every GPU instance and compute instance is gone, with its capability
//     files and MIG device file: MIG devices are not persistent across
//     reboots, and whoever wants them creates them again (NVIDIA MIG User
//     Guide, "Getting Started with MIG",
//     https://docs.nvidia.com/datacenter/tesla/mig-user-guide/). Made again,
//     they get new UUIDs (migUUID includes the boot ID from now on).
//   - Each GPU is reset, so a pending MIG mode takes effect.
//   - Ampere GPUs (A100, A30: needsReset) keep that MIG mode. There it is
//     an InfoROM setting that, like ECC mode, persists across reboots until
//     an admin toggles it (MIG User Guide, "Deployment Considerations"),
//     and a driver may not change it, since the change needs a GPU reset.
//     Hopper and newer GPUs, whose MIG mode changes without a reset, come
//     back with MIG mode off: whoever wants MIG mode enables it again after
//     the boot (as nvidia-mig-manager does).
//   - Compute policies (time slices) are back at their defaults.
//   - XID faults and their pending recovery actions are gone (a reset is
//     their recovery), and no other client holds a GPU. The faults that an
//     operator injects as lasting conditions (a lost GPU, an error code,
//     missing privileges) stay until cleared.
//   - The boot ID changes.
//
// The result is persisted: the next New on the same directory sees the
// rebooted node. Reboot works on a Simulator loaded while no plugin runs,
// which is how a node is rebooted offline. MPS daemons and CDI specs are
// not the simulator's: the caller clears them.
func (s *Simulator) Reboot() error {
	m := s.mig
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		m.dropInstances(dev)
		mode := m.pending[dev]
		if !needsReset(dev) {
			mode = nvml.DEVICE_MIG_DISABLE
		}
		dev.Lock()
		dev.MigMode = mode
		dev.Unlock()
		m.pending[dev] = mode
	}
	// /dev is made anew at boot: no MIG device file outlives it, whatever
	// wrote it.
	migDevDir := filepath.Dir(s.MigDevicePath("x"))
	if entries, err := os.ReadDir(migDevDir); err == nil {
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(migDevDir, e.Name()))
		}
	}
	if ret := m.save(); ret != nvml.SUCCESS {
		return fmt.Errorf("save simulated MIG state: %s", nvml.ErrorString(ret))
	}
	if err := os.RemoveAll(s.computePolicyDir()); err != nil {
		return fmt.Errorf("reset simulated compute policies: %w", err)
	}
	if err := s.clearBootFaults(); err != nil {
		return err
	}
	// Every GPU comes up bound to nvidia (sysfs.go).
	if err := s.rebindAll(); err != nil {
		return fmt.Errorf("reset simulated PCI bindings: %w", err)
	}
	if err := s.markRebooted(); err != nil {
		return err
	}
	// The boot ID last: a Reboot that failed before can be run again.
	id, err := newBootID()
	if err != nil {
		return err
	}
	if err := writeBootID(s.BootIDPath(), id, true); err != nil {
		return err
	}
	s.bootID.Store(id)
	return nil
}

// clearBootFaults removes the injected faults that a reboot ends (XID
// faults, other clients holding a GPU) and every pending recovery action.
func (s *Simulator) clearBootFaults() error {
	entries, err := os.ReadDir(s.faultsDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read simulated faults: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".xid") || strings.HasSuffix(name, ".in-use") {
			if err := os.Remove(filepath.Join(s.faultsDir(), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("clear simulated fault: %w", err)
			}
		}
	}
	_ = os.Remove(s.faultsDir()) // only when nothing is left in it
	s.noFaultsAt.Store(0)
	s.xids.mu.Lock()
	s.xids.pending = map[string]bool{}
	s.xids.seen = map[string]string{}
	s.xids.mu.Unlock()
	return nil
}

// CheckNode reports whether dir holds the simulated node that New would
// build from profile and nodeName, without changing anything: an error
// when dir holds no simulated node, or one whose recorded GPUs are other
// GPUs (another profile or node name), which New would forget.
func CheckNode(profile Profile, nodeName, dir string) error {
	profile, err := completeProfile(profile)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no simulated node in %s: %w", dir, err)
	}
	files, newest := migStateFiles(filepath.Join(dir, "mig-state"))
	var recorded map[string]json.RawMessage
	for n := newest; n >= 0 && recorded == nil; n-- {
		if data, err := os.ReadFile(files[n]); err == nil && json.Unmarshal(data, &recorded) != nil {
			recorded = nil
		}
	}
	if len(recorded) == 0 {
		return fmt.Errorf("no simulated GPUs recorded in %s", dir)
	}
	for i := range profile.Count {
		if _, ok := recorded[stableUUID("GPU", profile.Name, nodeName, fmt.Sprint(i))]; !ok {
			return fmt.Errorf("%s holds other simulated GPUs than profile %s on node %s (%d recorded)", dir, profile.Name, nodeName, len(recorded))
		}
	}
	return nil
}
