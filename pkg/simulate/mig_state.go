// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// migState is the persisted MIG state of one GPU.
type migState struct {
	MigMode int `json:"migMode"`
	// PendingMigMode is the mode a reset would activate; absent when it is
	// MigMode.
	PendingMigMode *int            `json:"pendingMigMode,omitempty"`
	Instances      []instanceState `json:"instances,omitempty"`
	// ProfileMigMode is the MIG mode the profile asked for when the state
	// was written (profile_mode.go); absent in states of older simulators.
	ProfileMigMode *int `json:"profileMigMode,omitempty"`
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

// The MIG state is kept in generation files mig-state.<n>.json: each save
// writes a new file and then removes the previous one. A torn write leaves
// the previous generation readable, and no rename replaces an existing file
// (which makes ext4 flush data, tripling the cost of a MIG operation).
func (s *Simulator) migStateDir() string { return filepath.Join(s.Dir, "mig-state") }

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

// restore recreates persisted GPU and compute instances on a fresh mock.
func (m *migSim) restore(dev *server.Device, st migState) error {
	dev.Lock()
	defer dev.Unlock()
	dev.MigMode = st.MigMode
	m.pending[dev] = st.MigMode
	if st.PendingMigMode != nil {
		m.pending[dev] = *st.PendingMigMode
	}
	for _, in := range st.Instances {
		if _, ok := m.sim.Profile.hw.profileRow(in.ProfileID); !ok {
			continue // recorded by an older simulator with other profile IDs
		}
		gi := m.newGI(dev, in.ProfileID, nvml.GpuInstancePlacement{Start: in.Start, Size: in.Size}, in.ID)
		dev.GpuInstanceCounter = max(dev.GpuInstanceCounter, in.ID+1)
		if err := m.sim.writeCap(m.sim.GICapPath(dev.Minor, int(in.ID)), GICapMinor(dev.Minor, int(in.ID))); err != nil {
			return err
		}
		for _, c := range in.ComputeInstances {
			ci := server.NewComputeInstanceFromInfo(nvml.ComputeInstanceInfo{Device: dev, GpuInstance: gi, Id: c.ID, ProfileId: c.ProfileID})
			m.wireCI(gi, ci)
			gi.ComputeInstances[ci] = struct{}{}
			gi.ComputeInstanceCounter = max(gi.ComputeInstanceCounter, c.ID+1)
			if err := m.writeInstanceFiles(dev, gi, ci); err != nil {
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
		profileMode := m.profileMigMode()
		st := migState{MigMode: dev.MigMode, ProfileMigMode: &profileMode}
		if p := m.pending[dev]; p != dev.MigMode {
			st.PendingMigMode = &p
		}
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
		// Every GPU is recorded, MIG mode off included: a GPU without a
		// record is one the simulator has never seen (see wireMig).
		state[dev.UUID] = st
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
