// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Device nodes. By default the simulator stands regular files in for the
// GPUs' device nodes (DevicePath). With MakeDeviceNodes it also creates
// real character devices, with the NVIDIA kernel driver's numbers, under a
// dev root of its own (DevRoot()/dev), as the driver's installer and
// nvidia-modprobe do under /dev:
//
//	/dev/nvidia<minor>                 195:<minor>
//	/dev/nvidiactl                     195:255
//	/dev/nvidia-uvm, nvidia-uvm-tools  <nvidia-uvm major>:0, :1
//	/dev/nvidia-caps/nvidia-cap1, 2    <nvidia-caps major>:1, :2 (mig/config, mig/monitor)
//	/dev/nvidia-caps/nvidia-cap<N>     <nvidia-caps major>:N while MIG instance N exists
//
// nvidia-uvm's and nvidia-caps' majors are dynamic on a real host; the
// simulator takes the ones its /proc/devices lists (UVMMajor, CapsMajor),
// where nvcdi and the plugin look them up. Nothing opens these nodes (no
// kernel driver answers them): they are what nvcdi finds and names in CDI
// specs, and what the container runtime creates in containers.

// Character-device majors of the simulated NVIDIA driver.
const (
	NvidiaMajor = 195
	UVMMajor    = 508
	// ControlMinor is /dev/nvidiactl's minor.
	ControlMinor = 255
)

// DevRoot is the root whose dev/ holds the simulator's device nodes once
// MakeDeviceNodes was called (nvcdi's dev root).
func (s *Simulator) DevRoot() string { return filepath.Join(s.Dir, "devroot") }

func (s *Simulator) devNode(name string) string { return filepath.Join(s.DevRoot(), "dev", name) }

// CapDeviceNodePath is the nvidia-caps device node of a capability minor.
func (s *Simulator) CapDeviceNodePath(minor int) string {
	return s.devNode(fmt.Sprintf("nvidia-caps/nvidia-cap%d", minor))
}

// MakeDeviceNodes creates the device nodes of the simulated GPUs, their
// control devices and the MIG capabilities that exist now, and keeps
// creating and removing MIG capability nodes as instances come and go. It
// needs CAP_MKNOD. Nodes already there with the right numbers are kept.
func (s *Simulator) MakeDeviceNodes() error {
	nodes := map[string][2]uint32{
		"nvidiactl":               {NvidiaMajor, ControlMinor},
		"nvidia-uvm":              {UVMMajor, 0},
		"nvidia-uvm-tools":        {UVMMajor, 1},
		"nvidia-caps/nvidia-cap1": {CapsMajor, 1},
		"nvidia-caps/nvidia-cap2": {CapsMajor, 2},
	}
	for _, d := range s.Devices {
		minor, ret := d.GetMinorNumber()
		if ret != 0 {
			return fmt.Errorf("simulated device nodes: minor number: %v", ret)
		}
		nodes[fmt.Sprintf("nvidia%d", minor)] = [2]uint32{NvidiaMajor, uint32(minor)}
	}
	for name, n := range nodes {
		if err := mknodIfNeeded(s.devNode(name), n[0], n[1]); err != nil {
			return err
		}
	}
	s.devNodes.Store(true)
	// The MIG instances that exist (restored from the persisted state).
	root := s.capsDir()
	return filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || e.Name() != "access" || filepath.Dir(path) == filepath.Join(root, "mig") {
			return err
		}
		minor, err := capFileMinor(path)
		if err != nil {
			return err
		}
		return s.makeCapNode(minor)
	})
}

// RemoveDeviceNodes removes every device node MakeDeviceNodes made.
func (s *Simulator) RemoveDeviceNodes() error {
	s.devNodes.Store(false)
	return os.RemoveAll(s.DevRoot())
}

func (s *Simulator) makeCapNode(minor int) error {
	if !s.devNodes.Load() {
		return nil
	}
	return mknodIfNeeded(s.CapDeviceNodePath(minor), CapsMajor, uint32(minor))
}

func (s *Simulator) removeCapNode(minor int) {
	if s.devNodes.Load() {
		_ = os.Remove(s.CapDeviceNodePath(minor))
	}
}

// writeCap writes a MIG instance's capability file and, with device nodes
// on, its device node.
func (s *Simulator) writeCap(path string, minor int) error {
	if err := writeCap(path, minor); err != nil {
		return err
	}
	return s.makeCapNode(minor)
}

func capFileMinor(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var m int
		if _, err := fmt.Sscanf(line, "DeviceFileMinor: %d", &m); err == nil {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%s: no DeviceFileMinor", path)
}

// mknodIfNeeded creates a character device (mode 0666, as nvidia-modprobe
// makes the GPUs' nodes), replacing whatever else is at path.
func mknodIfNeeded(path string, major, minor uint32) error {
	want := unix.Mkdev(major, minor)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == want {
			return nil
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(want)); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("create device node %s (%d:%d): %w; simulated device nodes need CAP_MKNOD", path, major, minor, err)
		}
		return fmt.Errorf("create device node %s (%d:%d): %w", path, major, minor, err)
	}
	// The umask may have narrowed the mode.
	return os.Chmod(path, 0o666)
}
