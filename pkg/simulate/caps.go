// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The NVIDIA kernel driver describes each MIG GPU and compute instance as a
// capability in procfs, and a process may use a MIG device only if it can
// open the capability's device node /dev/nvidia-caps/nvidia-cap<minor>:
//
//	/proc/driver/nvidia/capabilities/mig/config            (minor 1, 0400)
//	/proc/driver/nvidia/capabilities/mig/monitor           (minor 2, 0444)
//	/proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/access
//	/proc/driver/nvidia/capabilities/gpu<N>/mig/gi<G>/ci<C>/access
//
// each holding "DeviceFileMinor: <minor>\nDeviceFileMode: <mode, decimal>\n
// DeviceFileModify: 1\n" (NVIDIA MIG User Guide, "Device Nodes and
// Capabilities"; N is the GPU's minor number). The minors are fixed and
// listed in /proc/driver/nvidia-caps/mig-minors ("gpu0/gi0/access 3",
// "gpu0/gi0/ci0/access 4", ..., 15 GPU instances of 8 compute instances per
// GPU), and the device major is "nvidia-caps" in /proc/devices. The
// simulator keeps the same tree under ProcRoot, with a GPU instance's and
// compute instance's access file present exactly while the instance exists
// (their directories may outlive it).

// CapsMajor is the simulated character-device major of nvidia-caps.
const CapsMajor = 237

const (
	capsPerGPU = 15 * 9 // GPU instances x (the instance + 8 compute instances)
	capMode    = 292    // 0444, as the driver reports for instance capabilities
)

// ProcRoot is the simulated /proc.
func (s *Simulator) ProcRoot() string { return filepath.Join(s.Dir, "proc") }

func (s *Simulator) capsDir() string {
	return filepath.Join(s.ProcRoot(), "driver", "nvidia", "capabilities")
}

// GICapMinor is the nvidia-caps minor of GPU instance gi on the GPU with the
// given minor number; CICapMinor that of its compute instance ci.
func GICapMinor(gpuMinor, gi int) int { return 3 + gpuMinor*capsPerGPU + gi*9 }

// CICapMinor is the nvidia-caps minor of a compute instance.
func CICapMinor(gpuMinor, gi, ci int) int { return GICapMinor(gpuMinor, gi) + 1 + ci }

// GICapPath is the access file of a GPU instance.
func (s *Simulator) GICapPath(gpuMinor, gi int) string {
	return filepath.Join(s.capsDir(), fmt.Sprintf("gpu%d", gpuMinor), "mig", fmt.Sprintf("gi%d", gi), "access")
}

// CICapPath is the access file of a compute instance.
func (s *Simulator) CICapPath(gpuMinor, gi, ci int) string {
	return filepath.Join(s.capsDir(), fmt.Sprintf("gpu%d", gpuMinor), "mig", fmt.Sprintf("gi%d", gi), fmt.Sprintf("ci%d", ci), "access")
}

func capFile(minor, mode int) []byte {
	return []byte(fmt.Sprintf("DeviceFileMinor: %d\nDeviceFileMode: %d\nDeviceFileModify: 1\n", minor, mode))
}

// writeProcFiles writes the parts of the tree that do not change: the
// global capabilities, the minor table and /proc/devices.
func (s *Simulator) writeProcFiles(gpuMinors []int) error {
	for name, c := range map[string][2]int{"config": {1, 256}, "monitor": {2, capMode}} {
		p := filepath.Join(s.capsDir(), "mig", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeIfChanged(p, capFile(c[0], c[1])); err != nil {
			return err
		}
	}
	var b strings.Builder
	b.WriteString("config 1\nmonitor 2\n")
	for _, m := range gpuMinors {
		for gi := 0; gi < 15; gi++ {
			fmt.Fprintf(&b, "gpu%d/gi%d/access %d\n", m, gi, GICapMinor(m, gi))
			for ci := 0; ci < 8; ci++ {
				fmt.Fprintf(&b, "gpu%d/gi%d/ci%d/access %d\n", m, gi, ci, CICapMinor(m, gi, ci))
			}
		}
	}
	minors := filepath.Join(s.ProcRoot(), "driver", "nvidia-caps", "mig-minors")
	if err := os.MkdirAll(filepath.Dir(minors), 0o755); err != nil {
		return err
	}
	if err := writeIfChanged(minors, []byte(b.String())); err != nil {
		return err
	}
	devices := fmt.Sprintf("Character devices:\n  1 mem\n195 nvidia-frontend\n%d nvidia-caps\n%d nvidia-uvm\n\nBlock devices:\n  7 loop\n", CapsMajor, UVMMajor)
	return writeIfChanged(filepath.Join(s.ProcRoot(), "devices"), []byte(devices))
}

func writeCap(path string, minor int) error {
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
	}
	return writeIfChanged(path, capFile(minor, capMode))
}

// removeGICaps removes a GPU instance's access file (NVML destroys a GPU
// instance only once its compute instances are gone). The directories stay
// for the next instance with that ID: creating and removing directories
// costs more than the rest of a MIG prepare on some filesystems, and
// readers look for the access files.
func (s *Simulator) removeGICaps(gpuMinor, gi int) {
	_ = os.Remove(s.GICapPath(gpuMinor, gi))
	s.removeCapNode(GICapMinor(gpuMinor, gi))
}

func (s *Simulator) removeCICap(gpuMinor, gi, ci int) {
	_ = os.Remove(s.CICapPath(gpuMinor, gi, ci))
	s.removeCapNode(CICapMinor(gpuMinor, gi, ci))
}
