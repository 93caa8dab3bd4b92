package simulate

import (
	"encoding/json"
	"errors"
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

// migState is the persisted MIG state of one GPU.
type migState struct {
	MigMode   int             `json:"migMode"`
	Instances []instanceState `json:"instances,omitempty"`
}

type instanceState struct {
	ProfileID        uint32  `json:"profileID"`
	Start            uint32  `json:"start"`
	Size             uint32  `json:"size"`
	ID               uint32  `json:"id"`
	ComputeInstances []ciRec `json:"computeInstances,omitempty"`
}

type ciRec struct {
	ProfileID uint32 `json:"profileID"`
	ID        uint32 `json:"id"`
}

// migSim holds the wiring shared by all simulated GPUs.
type migSim struct {
	mu  sync.Mutex // serialises state changes and their persistence
	dir string
	seq int // generation of the newest state file
	sim *Simulator

	handlesMu sync.Mutex
	handles   map[*server.ComputeInstance]nvml.Device // MIG device handles, built once
}

// The MIG state is kept in generation files mig-state.<n>.json: each save
// writes a new file and then removes the previous one. A torn write leaves
// the previous generation readable, and no rename replaces an existing file
// (which makes ext4 flush data, tripling the cost of a MIG operation).
func (s *Simulator) migStateDir() string { return filepath.Join(s.Dir, "mig-state") }

// MigStateFile is the newest persisted MIG state file, "" when none.
func (s *Simulator) MigStateFile() string {
	files, seq := migStateFiles(s.migStateDir())
	if len(files) == 0 {
		return ""
	}
	return files[seq]
}

// migStateFiles lists the generation files by number and returns the newest.
func migStateFiles(dir string) (map[int]string, int) {
	entries, _ := os.ReadDir(dir)
	files, newest := map[int]string{}, -1
	for _, e := range entries {
		var n int
		if _, err := fmt.Sscanf(e.Name(), "mig-state.%d.json", &n); err == nil {
			files[n] = filepath.Join(dir, e.Name())
			newest = max(newest, n)
		}
	}
	return files, newest
}

// MigDevicePath is the simulated MIG device file the CDI spec mounts.
func (s *Simulator) MigDevicePath(uuid string) string {
	return filepath.Join(s.Dir, "dev", "mig", uuid)
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
		for gi := range dev.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
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
		gi.RLock()
		busy := len(gi.ComputeInstances) > 0
		gi.RUnlock()
		if busy {
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
		for ci := range gi.ComputeInstances {
			if int(ci.Info.Id) == id {
				return ci, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	gi.DestroyFunc = func() nvml.Return {
		m.mu.Lock()
		defer m.mu.Unlock()
		gi.RLock()
		busy := len(gi.ComputeInstances) > 0
		gi.RUnlock()
		if busy {
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

// restore recreates persisted GPU and compute instances on a fresh mock.
func (m *migSim) restore(dev *server.Device, st migState) error {
	dev.Lock()
	defer dev.Unlock()
	dev.MigMode = st.MigMode
	for _, in := range st.Instances {
		gi := m.newGI(dev, in.ProfileID, nvml.GpuInstancePlacement{Start: in.Start, Size: in.Size}, in.ID)
		dev.GpuInstanceCounter = max(dev.GpuInstanceCounter, in.ID+1)
		for _, c := range in.ComputeInstances {
			ci := server.NewComputeInstanceFromInfo(nvml.ComputeInstanceInfo{Device: dev, GpuInstance: gi, Id: c.ID, ProfileId: c.ProfileID})
			m.wireCI(gi, ci)
			gi.ComputeInstances[ci] = struct{}{}
			gi.ComputeInstanceCounter = max(gi.ComputeInstanceCounter, c.ID+1)
			if err := m.writeMigDeviceFile(dev, gi, ci); err != nil {
				return err
			}
		}
	}
	return nil
}

// save persists every GPU's MIG state atomically; the caller holds m.mu.
func (m *migSim) save() nvml.Return {
	state := map[string]migState{}
	for _, d := range m.sim.Devices {
		dev := d.(*server.Device)
		dev.RLock()
		st := migState{MigMode: dev.MigMode}
		for gi := range dev.GpuInstances {
			in := instanceState{ProfileID: gi.Info.ProfileId, Start: gi.Info.Placement.Start, Size: gi.Info.Placement.Size, ID: gi.Info.Id}
			gi.RLock()
			for ci := range gi.ComputeInstances {
				in.ComputeInstances = append(in.ComputeInstances, ciRec{ProfileID: ci.Info.ProfileId, ID: ci.Info.Id})
			}
			gi.RUnlock()
			st.Instances = append(st.Instances, in)
		}
		dev.RUnlock()
		sort.Slice(st.Instances, func(a, b int) bool { return st.Instances[a].Start < st.Instances[b].Start })
		if st.MigMode != 0 || len(st.Instances) > 0 {
			state[dev.UUID] = st
		}
	}
	data, err := json.Marshal(state)
	if err != nil {
		return nvml.ERROR_UNKNOWN
	}
	next := filepath.Join(m.dir, fmt.Sprintf("mig-state.%d.json", m.seq+1))
	if err := os.WriteFile(next, data, 0o644); err != nil {
		return nvml.ERROR_UNKNOWN
	}
	_ = os.Remove(filepath.Join(m.dir, fmt.Sprintf("mig-state.%d.json", m.seq)))
	m.seq++
	return nvml.SUCCESS
}

// load reads the newest readable generation and removes the others.
func (m *migSim) load() (map[string]migState, error) {
	files, newest := migStateFiles(m.dir)
	state := map[string]migState{}
	for n := newest; n >= 0; n-- {
		path, ok := files[n]
		if !ok {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read simulated MIG state: %w", err)
		}
		if err == nil && json.Unmarshal(data, &state) == nil {
			m.seq = n
			break
		}
		state = map[string]migState{} // torn write: fall back a generation
	}
	for n, path := range files {
		if n != m.seq {
			_ = os.Remove(path)
		}
	}
	return state, nil
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
