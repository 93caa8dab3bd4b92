// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package backend selects where a node's devices come from: real NVML with
// nvcdi's CDI edits and NVIDIA's tools from the driver root, or a simulated
// node with its stand-ins. The driver package only consumes the result, so
// it does not depend on the simulator.
package backend

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Backend is where devices come from: real NVML or a simulated node.
type Backend struct {
	NVML      nvml.Interface
	Inventory *nvdev.Inventory
	Edits     cdi.Edits
	// Simulator is set for simulated nodes.
	Simulator *simulate.Simulator
	// TimeSlicer applies time slices: NVIDIA's nvidia-smi in the driver
	// root, or the simulator's record. MPSLauncher runs MPS daemons as
	// local processes when no pod runner is configured: the stand-in when
	// simulating, none for real GPUs (their daemons run in pods).
	TimeSlicer  sharing.TimeSlicer
	MPSLauncher sharing.DaemonLauncher
	// BootIDFile holds the boot ID of the node: the kernel's, or the
	// simulated node's (which a simulated reboot changes). Empty means
	// the kernel's.
	BootIDFile string
	// VFIO binds GPUs to vfio-pci and back (pkg/vfio): the host's sysfs,
	// or the simulator's. VFIODevDir, when set, holds the simulator's
	// stand-ins for /dev/vfio/*.
	VFIO       vfio.Host
	VFIODevDir string
}

// Options select and locate the backend.
type Options struct {
	// SimulateProfile, when set, simulates GPUs ("h100x8").
	SimulateProfile string
	// SimulateNodeMode is NodeModeFiles (default) or NodeModeDevices
	// (userspace.go): what besides the GPUs is simulated.
	SimulateNodeMode string
	NodeName         string
	// StateDir holds the simulator's files.
	StateDir string
	// NvidiaSmiStub is the static nvidia-smi stand-in to expose in
	// simulated containers; empty to search next to the executable.
	NvidiaSmiStub string

	DriverRoot string
	// HostDriverRoot is DriverRoot as the host sees it (for CDI specs).
	HostDriverRoot string
	NVMLLibrary    string
	// HookPath is nvidia-cdi-hook as the host sees it, for CDI specs. When
	// empty and HookInstallDir is set, the plugin installs its own copy
	// there; when both are empty, nvcdi's default /usr/bin/nvidia-cdi-hook
	// (a host's nvidia-container-toolkit) is named.
	HookPath string
	// HookInstallDir is a host directory, mounted at the same path in the
	// plugin's container, to install nvidia-cdi-hook into.
	HookInstallDir string
	// HookSource is the nvidia-cdi-hook binary to install; empty to use
	// the one next to the executable (both are in the image's /usr/bin).
	HookSource string
	SysfsRoot  string
}

// Open discovers the node's devices.
func Open(o Options) (*Backend, error) {
	if o.SimulateProfile != "" {
		if err := CheckNodeMode(o.SimulateNodeMode); err != nil {
			return nil, err
		}
		if o.SimulateNodeMode == NodeModeDevices {
			return openSimulatedDevices(o)
		}
		return openSimulated(o)
	}
	lib, err := nvdev.OpenNVML(o.DriverRoot, o.NVMLLibrary)
	if err != nil {
		return nil, err
	}
	return New(lib, o)
}

// New discovers the devices of an initialized NVML library and
// builds the real driver's CDI edits (nvcdi under o.DriverRoot) and sharing
// tools for them.
func New(lib nvml.Interface, o Options) (*Backend, error) {
	inv, err := nvdev.Discover(lib, nvdev.Options{SysfsRoot: o.SysfsRoot})
	if err != nil {
		return nil, fmt.Errorf("discover GPUs: %w", err)
	}
	hook, err := resolveHook(o)
	if err != nil {
		return nil, err
	}
	// The dev root is the driver root's /dev, or the host's when a
	// containerized driver's root has none.
	edits, err := cdi.NewNvcdiEdits(lib, cdi.NvcdiOptions{DriverRoot: o.DriverRoot, HostDriverRoot: o.HostDriverRoot, HookPath: hook})
	if err != nil {
		return nil, err
	}
	host := vfio.Host{SysfsRoot: cmp.Or(o.SysfsRoot, "/sys"), DevRoot: "/dev"}
	return &Backend{NVML: lib, Inventory: inv, Edits: edits, TimeSlicer: sharing.NvidiaTools{Root: o.DriverRoot}, VFIO: host}, nil
}

// resolveHook returns the host path of nvidia-cdi-hook for CDI specs,
// installing the plugin's own copy when asked to.
func resolveHook(o Options) (string, error) {
	if o.HookPath != "" || o.HookInstallDir == "" {
		return o.HookPath, nil
	}
	src := o.HookSource
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find %s: %w", cdi.HookName, err)
		}
		src = filepath.Join(filepath.Dir(exe), cdi.HookName)
	}
	path, err := cdi.InstallHook(src, o.HookInstallDir)
	if err != nil {
		return "", fmt.Errorf("%w; the image ships it next to the plugin, or pass --nvidia-cdi-hook-path", err)
	}
	return path, nil
}

func openSimulated(o Options) (*Backend, error) {
	sim, inv, err := simulate.Discover(o.SimulateProfile, o.NodeName, filepath.Join(o.StateDir, "simulated"))
	if err != nil {
		return nil, err
	}
	// Device nodes of an earlier run in the devices node mode go.
	if err := sim.RemoveDeviceNodes(); err != nil {
		return nil, err
	}
	smi, err := installStub(o.NvidiaSmiStub, filepath.Join(sim.Dir, "bin", "nvidia-smi"))
	if err != nil {
		return nil, err
	}
	edits := cdi.SimulatedEdits{DevicePath: sim.DevicePath, MigDevicePath: sim.MigDevicePath, ControlDevicePath: sim.ControlDevicePath(), NvidiaSmiPath: smi}
	return &Backend{NVML: sim, Inventory: inv, Edits: edits, Simulator: sim, TimeSlicer: sim, MPSLauncher: sharing.StandIn{}, BootIDFile: sim.BootIDPath(),
		VFIO: sim.VFIO(), VFIODevDir: filepath.Join(sim.Dir, "dev", "vfio")}, nil
}

// installStub copies the nvidia-smi stand-in into the state directory,
// which is a host path that containerd can bind-mount from even when the
// plugin runs in a container. It returns "" when no stub is available.
func installStub(src, dst string) (string, error) {
	if src == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", nil
		}
		src = filepath.Join(filepath.Dir(exe), "nvidia-smi-sim")
		if _, err := os.Stat(src); err != nil {
			return "", nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("nvidia-smi stand-in: %w; check --nvidia-smi-stub", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}
