// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// The simulated GPUs behave like MIG hardware:
//
//   - MIG mode has a current and a pending value. nvmlDeviceSetMigMode
//     returns (activation status, return code) separately. On Ampere a
//     change stays pending until the GPU is reset (ResetGPU; the simulator
//     never resets by itself) and the activation status says so; on Hopper
//     and newer it takes effect at once unless another client holds the
//     GPU (SetInUse), when it stays pending with activation status IN_USE.
//   - GPU instances are created only at valid placements, never
//     overlapping, at most InstanceCount of a profile, while MIG mode is on;
//     their IDs follow the placement as the driver's do (giIDFor).
//   - Without privileges (SetUnprivileged) mode changes and instance
//     creation and destruction fail with NO_PERMISSION.
//   - MIG devices have UUIDs, handles and device attributes, a capability
//     tree in ProcRoot, and the whole MIG state is persisted in the state
//     directory so a restarted plugin finds what the GPU still holds; a
//     changed profile changes MIG mode as an admin would (profile_mode.go).
//   - A simulated reboot (Reboot, reboot.go) destroys every instance; MIG
//     device UUIDs include the boot ID from the first reboot on, so
//     re-created devices get new ones.

// migSim holds the wiring shared by all simulated GPUs.
type migSim struct {
	mu      sync.Mutex // serialises state changes and their persistence
	dir     string
	seq     int // generation of the newest state file
	sim     *Simulator
	pending map[*server.Device]int // pending MIG mode; guarded by mu

	handlesMu sync.Mutex
	handles   map[*server.ComputeInstance]nvml.Device // MIG device handles, built once
}

func (s *Simulator) wireMig() error {
	m := &migSim{dir: s.migStateDir(), sim: s, handles: map[*server.ComputeInstance]nvml.Device{}, pending: map[*server.Device]int{}}
	s.mig = m
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("simulated MIG state: %w", err)
	}
	state, err := m.load()
	if err != nil {
		return err
	}
	m.wireUUIDLookup()
	dirty := false
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		m.wireDevice(dev)
		st, ok := state[dev.UUID]
		if !ok {
			// Never seen: the GPU is as an admin left it at boot.
			dirty = true
			st.MigMode = m.profileMigMode()
		}
		if err := m.restore(dev, st); err != nil {
			return err
		}
		// A changed profile is an admin's MIG mode change (profile_mode.go).
		if ok && m.profileChanged(dev, st) {
			m.mu.Lock()
			m.applyProfileMigMode(dev)
			m.mu.Unlock()
		}
		dirty = dirty || st.ProfileMigMode == nil || *st.ProfileMigMode != m.profileMigMode()
	}
	if dirty {
		m.mu.Lock()
		defer m.mu.Unlock()
		if ret := m.save(); ret != nvml.SUCCESS {
			return fmt.Errorf("simulated MIG state: %s", nvml.ErrorString(ret))
		}
	}
	return nil
}

func (m *migSim) currentMode(dev *server.Device) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return dev.MigMode
}

func needsReset(dev *server.Device) bool { return dev.Config.Architecture < nvml.DEVICE_ARCH_HOPPER }

func (m *migSim) wireDevice(dev *server.Device) {
	hw := m.sim.Profile.hw
	dev.GetMigModeFunc = func() (int, int, nvml.Return) {
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return 0, 0, r
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		return dev.MigMode, m.pending[dev], nvml.SUCCESS
	}
	// SetMigMode returns (activation status, return code), in go-nvml's
	// order. A call that fails leaves the activation status at SUCCESS, as
	// the real binding does (it is only written when the call succeeds).
	dev.SetMigModeFunc = func(mode int) (nvml.Return, nvml.Return) {
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return nvml.SUCCESS, r
		}
		if m.sim.unprivileged() {
			return nvml.SUCCESS, nvml.ERROR_NO_PERMISSION
		}
		if mode != nvml.DEVICE_MIG_ENABLE && mode != nvml.DEVICE_MIG_DISABLE {
			return nvml.SUCCESS, nvml.ERROR_INVALID_ARGUMENT
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if mode == nvml.DEVICE_MIG_DISABLE && m.instanceCount(dev) > 0 {
			return nvml.SUCCESS, nvml.ERROR_IN_USE
		}
		before := [2]int{dev.MigMode, m.pending[dev]}
		m.pending[dev] = mode
		activation := nvml.SUCCESS
		switch {
		case dev.MigMode == mode:
		case m.sim.inUse(dev.UUID):
			activation = nvml.ERROR_IN_USE
		case needsReset(dev):
			activation = nvml.ERROR_RESET_REQUIRED
		default:
			dev.Lock()
			dev.MigMode = mode
			dev.Unlock()
		}
		if before == [2]int{dev.MigMode, m.pending[dev]} {
			return activation, nvml.SUCCESS
		}
		return activation, m.save()
	}
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if ret := m.mayCreate(dev, info); ret != nvml.SUCCESS {
			return nil, ret
		}
		if !validPlacement(dev, info.Id, *placement) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return m.createGI(dev, info.Id, *placement)
	}
	dev.CreateGpuInstanceFunc = func(info *nvml.GpuInstanceProfileInfo) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if ret := m.mayCreate(dev, info); ret != nvml.SUCCESS {
			return nil, ret
		}
		for _, p := range dev.Config.MIGProfiles.GpuInstancePlacements[int(info.Id)] {
			if gi, ret := m.createGI(dev, info.Id, p); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
				return gi, ret
			}
		}
		return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
	}
	dev.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return nil, r
		}
		dev.RLock()
		defer dev.RUnlock()
		return findByID(dev.GpuInstances, func(gi *server.GpuInstance) uint32 { return gi.Info.Id }, id)
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return int(hw.profiles[0].instances), nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(index int) (nvml.Device, nvml.Return) {
		handles := m.migHandles(dev)
		if index < 0 || index >= len(handles) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return handles[index], nvml.SUCCESS
	}
	baseProfileInfo := dev.GetGpuInstanceProfileInfoFunc
	dev.GetGpuInstanceProfileInfoFunc = func(index int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return nvml.GpuInstanceProfileInfo{}, r
		}
		return baseProfileInfo(index)
	}
}

// mayCreate checks what NVML checks before creating a GPU instance of a
// profile; the caller holds m.mu.
func (m *migSim) mayCreate(dev *server.Device, info *nvml.GpuInstanceProfileInfo) nvml.Return {
	if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
		return r
	}
	if m.sim.unprivileged() {
		return nvml.ERROR_NO_PERMISSION
	}
	dev.RLock()
	defer dev.RUnlock()
	if dev.MigMode != nvml.DEVICE_MIG_ENABLE {
		return nvml.ERROR_NOT_SUPPORTED
	}
	if _, ok := m.sim.Profile.hw.profileRow(info.Id); !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return nvml.SUCCESS
}

// createGI creates a GPU instance at a valid placement; the caller holds
// m.mu.
func (m *migSim) createGI(dev *server.Device, profileID uint32, placement nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	row, _ := m.sim.Profile.hw.profileRow(profileID)
	n := uint32(0)
	dev.Lock()
	for gi := range dev.GpuInstances {
		if gi.Info.ProfileId == profileID {
			n++
		}
		if overlaps(gi.Info.Placement, placement) || n >= row.instances {
			dev.Unlock()
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
	}
	gi := m.newGI(dev, profileID, placement, giIDFor(m.sim.Profile.hw.memSlices, placement.Start, placement.Size))
	dev.Unlock()
	if err := m.sim.writeCap(m.sim.GICapPath(dev.Minor, int(gi.Info.Id)), GICapMinor(dev.Minor, int(gi.Info.Id))); err != nil {
		return nil, nvml.ERROR_UNKNOWN
	}
	return gi, m.save()
}

// newGI creates and wires a GPU instance; the caller holds dev's lock.
func (m *migSim) newGI(dev *server.Device, profileID uint32, placement nvml.GpuInstancePlacement, id uint32) *server.GpuInstance {
	gi := server.NewGpuInstanceFromInfo(nvml.GpuInstanceInfo{Device: dev, Id: id, ProfileId: profileID, Placement: placement}, dev.Config.MIGProfiles)
	baseCreate := gi.CreateComputeInstanceFunc
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return nil, r
		}
		if m.sim.unprivileged() {
			return nil, nvml.ERROR_NO_PERMISSION
		}
		if hasComputeInstances(gi) {
			// One compute instance spanning the whole GPU instance is all
			// this driver creates; a second one cannot fit.
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		ci, ret := baseCreate(info)
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		sci := ci.(*server.ComputeInstance)
		m.wireCI(gi, sci)
		if err := m.writeInstanceFiles(dev, gi, sci); err != nil {
			return nil, nvml.ERROR_UNKNOWN
		}
		return ci, m.save()
	}
	gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		gi.RLock()
		defer gi.RUnlock()
		return findByID(gi.ComputeInstances, func(ci *server.ComputeInstance) uint32 { return ci.Info.Id }, id)
	}
	gi.DestroyFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return r
		}
		if m.sim.unprivileged() {
			return nvml.ERROR_NO_PERMISSION
		}
		if hasComputeInstances(gi) {
			return nvml.ERROR_IN_USE
		}
		dev.Lock()
		delete(dev.GpuInstances, gi)
		dev.Unlock()
		m.sim.removeGICaps(dev.Minor, int(gi.Info.Id))
		return m.save()
	}
	dev.GpuInstances[gi] = struct{}{}
	return gi
}

func (m *migSim) wireCI(gi *server.GpuInstance, ci *server.ComputeInstance) {
	ci.DestroyFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		dev := gi.Info.Device.(*server.Device)
		if r := m.sim.fault(dev.UUID); r != nvml.SUCCESS {
			return r
		}
		if m.sim.unprivileged() {
			return nvml.ERROR_NO_PERMISSION
		}
		gi.Lock()
		delete(gi.ComputeInstances, ci)
		gi.Unlock()
		m.forgetCI(dev, gi, ci)
		return m.save()
	}
}

// instanceCount is how many GPU instances a GPU holds.
func (m *migSim) instanceCount(dev *server.Device) int {
	dev.RLock()
	defer dev.RUnlock()
	return len(dev.GpuInstances)
}

// migUUID is stable for a GPU and placement within one boot, so a
// restarted plugin (and its checkpoint) sees the same MIG device; after a
// Reboot the instance made again at that placement has a new UUID, as
// real MIG devices get a new one each time they are created. Every MIG
// device UUID and file comes from here (and migDevicePath). A node that
// never rebooted leaves the boot ID out (boot.go).
func (m *migSim) migUUID(dev *server.Device, gi *server.GpuInstance) string {
	if salt := m.sim.migSalt(); salt != "" {
		return stableUUID("MIG", salt, dev.UUID, fmt.Sprint(gi.Info.ProfileId), fmt.Sprint(gi.Info.Placement.Start))
	}
	return stableUUID("MIG", dev.UUID, fmt.Sprint(gi.Info.ProfileId), fmt.Sprint(gi.Info.Placement.Start))
}

// migDevicePath is the file standing in for the MIG device of gi.
func (m *migSim) migDevicePath(dev *server.Device, gi *server.GpuInstance) string {
	return m.sim.MigDevicePath(m.migUUID(dev, gi))
}

// writeInstanceFiles creates the compute instance's capability file and the
// file standing in for the MIG device's node: "<mig uuid>\t<profile>\t<parent
// uuid>", which the nvidia-smi stand-in prints. (Files are created, never
// truncated: on ext4 rewriting a file in place flushes it, which would cost
// more than the rest of a MIG prepare.)
func (m *migSim) writeInstanceFiles(dev *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance) error {
	giID, ciID := int(gi.Info.Id), int(ci.Info.Id)
	if err := m.sim.writeCap(m.sim.CICapPath(dev.Minor, giID, ciID), CICapMinor(dev.Minor, giID, ciID)); err != nil {
		return err
	}
	p := m.migDevicePath(dev, gi)
	if err := os.Mkdir(filepath.Dir(p), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	row, ok := m.sim.Profile.hw.profileRow(gi.Info.ProfileId)
	if !ok {
		return fmt.Errorf("no MIG profile with ID %d", gi.Info.ProfileId)
	}
	line := fmt.Sprintf("%s\t%s\t%s\n", m.migUUID(dev, gi), row.name, dev.UUID)
	return writeIfChanged(p, []byte(line))
}

// findByID looks an instance up by its NVML ID.
func findByID[T comparable](set map[T]struct{}, idOf func(T) uint32, id int) (T, nvml.Return) {
	for x := range set {
		if int(idOf(x)) == id {
			return x, nvml.SUCCESS
		}
	}
	var zero T
	return zero, nvml.ERROR_NOT_FOUND
}

func validPlacement(dev *server.Device, profileID uint32, p nvml.GpuInstancePlacement) bool {
	for _, v := range dev.Config.MIGProfiles.GpuInstancePlacements[int(profileID)] {
		if v == p {
			return true
		}
	}
	return false
}

func overlaps(a, b nvml.GpuInstancePlacement) bool {
	return a.Start < b.Start+b.Size && b.Start < a.Start+a.Size
}
