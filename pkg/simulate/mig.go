package simulate

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// The simulated GPUs behave like MIG hardware: GPU instances are created
// only at valid, non-overlapping placements while MIG mode is on, MIG
// devices have UUIDs and handles, and the whole MIG state is persisted in
// the state directory so a restarted plugin finds what the GPU still holds.

// migSim holds the wiring shared by all simulated GPUs.
type migSim struct {
	mu  sync.Mutex // serialises state changes and their persistence
	dir string
	seq int // generation of the newest state file
	sim *Simulator

	handlesMu sync.Mutex
	handles   map[*server.ComputeInstance]nvml.Device // MIG device handles, built once
}

func (s *Simulator) wireMig() error {
	m := &migSim{dir: s.migStateDir(), sim: s, handles: map[*server.ComputeInstance]nvml.Device{}}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("simulated MIG state: %w", err)
	}
	state, err := m.load()
	if err != nil {
		return err
	}
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		m.wireDevice(dev)
		if err := m.restore(dev, state[dev.UUID]); err != nil {
			return err
		}
	}
	return nil
}

func (m *migSim) wireDevice(dev *server.Device) {
	dev.SetMigModeFunc = func(mode int) (nvml.Return, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		dev.Lock()
		busy := len(dev.GpuInstances) > 0
		dev.Unlock()
		if busy && mode == nvml.DEVICE_MIG_DISABLE {
			return nvml.ERROR_IN_USE, nvml.ERROR_IN_USE
		}
		dev.Lock()
		changed := dev.MigMode != mode
		dev.MigMode = mode
		dev.Unlock()
		if !changed {
			return nvml.SUCCESS, nvml.SUCCESS
		}
		return nvml.SUCCESS, m.save()
	}
	dev.CreateGpuInstanceWithPlacementFunc = func(info *nvml.GpuInstanceProfileInfo, placement *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		dev.Lock()
		if dev.MigMode != nvml.DEVICE_MIG_ENABLE {
			dev.Unlock()
			return nil, nvml.ERROR_NOT_SUPPORTED
		}
		if !validPlacement(dev, info.Id, *placement) {
			dev.Unlock()
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		for gi := range dev.GpuInstances {
			if overlaps(gi.Info.Placement, *placement) {
				dev.Unlock()
				return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
			}
		}
		gi := m.newGI(dev, info.Id, *placement, dev.GpuInstanceCounter)
		dev.GpuInstanceCounter++
		dev.Unlock()
		return gi, m.save()
	}
	dev.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		dev.RLock()
		defer dev.RUnlock()
		return findByID(dev.GpuInstances, func(gi *server.GpuInstance) uint32 { return gi.Info.Id }, id)
	}
	dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	dev.GetMigDeviceHandleByIndexFunc = func(index int) (nvml.Device, nvml.Return) {
		handles := m.migHandles(dev)
		if index < 0 || index >= len(handles) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return handles[index], nvml.SUCCESS
	}
}

// newGI creates and wires a GPU instance; the caller holds dev's lock.
func (m *migSim) newGI(dev *server.Device, profileID uint32, placement nvml.GpuInstancePlacement, id uint32) *server.GpuInstance {
	gi := server.NewGpuInstanceFromInfo(nvml.GpuInstanceInfo{Device: dev, Id: id, ProfileId: profileID, Placement: placement}, dev.Config.MIGProfiles)
	baseCreate := gi.CreateComputeInstanceFunc
	gi.CreateComputeInstanceFunc = func(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if hasComputeInstances(gi) {
			// One compute instance spanning the whole GPU instance is all
			// this driver creates; a second one cannot fit.
			return nil, nvml.ERROR_INSUFFICIENT_RESOURCES
		}
		ci, ret := baseCreate(info)
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		m.wireCI(gi, ci.(*server.ComputeInstance))
		if err := m.writeMigDeviceFile(dev, gi, ci.(*server.ComputeInstance)); err != nil {
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
		if hasComputeInstances(gi) {
			return nvml.ERROR_IN_USE
		}
		dev.Lock()
		delete(dev.GpuInstances, gi)
		dev.Unlock()
		return m.save()
	}
	dev.GpuInstances[gi] = struct{}{}
	return gi
}

func (m *migSim) wireCI(gi *server.GpuInstance, ci *server.ComputeInstance) {
	ci.DestroyFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		gi.Lock()
		delete(gi.ComputeInstances, ci)
		gi.Unlock()
		m.handlesMu.Lock()
		delete(m.handles, ci)
		m.handlesMu.Unlock()
		dev := gi.Info.Device.(*server.Device)
		_ = os.Remove(m.sim.MigDevicePath(migUUID(dev, gi)))
		return m.save()
	}
}

// migUUID is stable for a GPU and placement, so a restarted plugin (and
// its checkpoint) sees the same MIG device.
func migUUID(dev *server.Device, gi *server.GpuInstance) string {
	return StableUUID("MIG", dev.UUID, fmt.Sprint(gi.Info.ProfileId), fmt.Sprint(gi.Info.Placement.Start))
}

// writeMigDeviceFile creates the file standing in for the MIG device's
// capability node: "<mig uuid>\t<profile>\t<parent uuid>", which the
// nvidia-smi stand-in prints.
func (m *migSim) writeMigDeviceFile(dev *server.Device, gi *server.GpuInstance, _ *server.ComputeInstance) error {
	p := m.sim.MigDevicePath(migUUID(dev, gi))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	info := dev.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]
	name, err := nvdev.MigProfileName(m.sim, info, dev.MemoryInfo.Total)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%s\t%s\t%s\n", migUUID(dev, gi), name, dev.UUID)
	return os.WriteFile(p, []byte(line), 0o644)
}

// migHandles returns a handle per MIG device (GPU instance with a compute
// instance), ordered by placement as NVML orders them.
func (m *migSim) migHandles(dev *server.Device) []nvml.Device {
	dev.RLock()
	gis := make([]*server.GpuInstance, 0, len(dev.GpuInstances))
	for gi := range dev.GpuInstances {
		gis = append(gis, gi)
	}
	dev.RUnlock()
	sort.Slice(gis, func(a, b int) bool { return gis[a].Info.Placement.Start < gis[b].Info.Placement.Start })
	var out []nvml.Device
	for _, gi := range gis {
		gi.RLock()
		for ci := range gi.ComputeInstances {
			out = append(out, m.handle(dev, gi, ci))
		}
		gi.RUnlock()
	}
	return out
}

// handle returns the cached handle of a MIG device; mock devices are large.
func (m *migSim) handle(parent *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance) nvml.Device {
	m.handlesMu.Lock()
	defer m.handlesMu.Unlock()
	h, ok := m.handles[ci]
	if !ok {
		h = migHandle(parent, gi, ci)
		m.handles[ci] = h
	}
	return h
}

func migHandle(parent *server.Device, gi *server.GpuInstance, ci *server.ComputeInstance) nvml.Device {
	info := parent.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]
	uuid := migUUID(parent, gi)
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS },
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS },
		GetNameFunc:                            func() (string, nvml.Return) { return parent.Config.Name, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: info.MemorySizeMB << 20}, nvml.SUCCESS
		},
	}
}

func hasComputeInstances(gi *server.GpuInstance) bool {
	gi.RLock()
	defer gi.RUnlock()
	return len(gi.ComputeInstances) > 0
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

// MigInstanceCount reports how many GPU instances a simulated GPU holds.
func (s *Simulator) MigInstanceCount(uuid string) int {
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		if dev.UUID == uuid {
			dev.RLock()
			defer dev.RUnlock()
			return len(dev.GpuInstances)
		}
	}
	return 0
}
