// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2"
)

// A profile's MIG suffix (MigSuffix) is the admin's MIG mode of the node's
// GPUs. Each GPU's persisted state records the mode the profile asked for
// when the state was written (migState.ProfileMigMode). At load:
//
//   - The same mode as recorded: a plain restart. The state stays exactly
//     as persisted, however the GPU's mode came to differ from the profile's
//     (a driver that turned MIG mode on, a pending change, a reboot after
//     which Hopper is back in MIG mode off): a real node keeps all of it.
//   - Another mode: the profile was changed, which stands for an admin who
//     changed the GPU's MIG mode while the plugin was down. It is applied
//     as the admin's nvidia-smi -mig 0|1 and, where the GPU needs one, the
//     reset: the mode becomes current and nothing stays pending. Turning it
//     off first destroys the GPU's MIG devices: NVML refuses to disable MIG
//     mode while GPU instances exist (the simulator does too, IN_USE), so
//     the admin destroys the compute and GPU instances first (nvidia-smi
//     mig -dci, -dgi; NVIDIA MIG User Guide, "Getting Started with MIG",
//     "Destroying GPU Instances"), and no MIG device exists with MIG mode
//     off. On Ampere (A100, A30) the mode takes effect only with a GPU
//     reset, on Hopper and newer at once when no process holds the GPU
//     (MIG User Guide, "Enable MIG Mode"); either way the admin's change is
//     complete before the plugin starts again.
//
// Each change is logged, one line per GPU.

// profileMigMode is the MIG mode the simulator's profile asks for.
func (m *migSim) profileMigMode() int {
	if m.sim.Profile.MigEnabled {
		return nvml.DEVICE_MIG_ENABLE
	}
	return nvml.DEVICE_MIG_DISABLE
}

// profileChanged reports whether a GPU's restored state was written under
// a profile asking for another MIG mode than the current one does.
//
// A state written by a simulator before ProfileMigMode existed (or by one
// of an earlier release after a rollback, which drops the field) does not
// say which profile it was written under. Taking its mode for the
// profile's everywhere would keep the reported defect on the very nodes
// that have it (deployed as a100-40gbx8 by an older simulator, now
// a100-40gbx8:mig); taking every mismatch for a changed profile would
// destroy MIG devices that running pods use (test/e2e's upgrade from an
// older release on h100x8, whose driver made MIG devices). What a mismatch
// means depends on who else changes that GPU's MIG mode:
//
//   - On a GPU whose MIG mode only changes with a reset (Ampere) only an
//     admin changes it: the driver never does (pkg/mig leaves it to the
//     admin) and the simulator never resets by itself. A mismatch there is
//     a changed profile, and is applied. (The exception, an admin's own
//     ResetGPU or SetMigModeAsAdmin under an unchanged profile, gives way
//     to the profile, the admin's word for that GPU's mode.)
//   - On Hopper and newer the driver turns MIG mode on for a MIG claim and
//     off once the GPU is empty (pkg/mig), and a reboot turns it off, so a
//     mismatch is ordinary. It is kept, as a restart with the same profile
//     keeps it; nothing is stuck, since the driver itself changes the mode
//     when it needs another.
//
// Either way the state is then recorded under the current profile.
func (m *migSim) profileChanged(dev *server.Device, st migState) bool {
	want := m.profileMigMode()
	if st.ProfileMigMode != nil {
		return *st.ProfileMigMode != want
	}
	return needsReset(dev) && st.MigMode != want
}

// applyProfileMigMode makes the profile's MIG mode the GPU's current one,
// as the admin's MIG mode change and reset do; the caller holds m.mu. A GPU
// already in that mode with none other pending is left as it is.
func (m *migSim) applyProfileMigMode(dev *server.Device) {
	mode := m.profileMigMode()
	from := dev.MigMode
	if from == mode && m.pending[dev] == mode {
		return
	}
	destroyed := 0
	if mode == nvml.DEVICE_MIG_DISABLE {
		destroyed = m.instanceCount(dev)
		m.dropInstances(dev)
	}
	dev.Lock()
	dev.MigMode = mode
	dev.Unlock()
	m.pending[dev] = mode
	// NVML's DEVICE_MIG_DISABLE and _ENABLE are nvidia-smi's -mig 0 and 1.
	as := fmt.Sprintf("nvidia-smi -mig %d", mode)
	if destroyed > 0 {
		as = "nvidia-smi mig -dci and -dgi, then " + as
	}
	if needsReset(dev) {
		as += " and a GPU reset"
	}
	profile := m.sim.Profile.Name
	if m.sim.Profile.MigEnabled {
		profile += MigSuffix
	}
	klog.Background().Info("Simulated profile changed MIG mode (an admin's "+as+")",
		"gpu", dev.UUID, "profile", profile, "from", migModeName(from), "to", migModeName(mode),
		"destroyedGPUInstances", destroyed)
}

func migModeName(mode int) string {
	if mode == nvml.DEVICE_MIG_ENABLE {
		return "enabled"
	}
	return "disabled"
}
