// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package backend

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// Node modes of a simulated node (Options.SimulateNodeMode).
const (
	// NodeModeFiles stands regular files in for device nodes and a static
	// nvidia-smi stand-in in for NVIDIA's userspace (cdi.SimulatedEdits):
	// no NVIDIA files and no privileges needed.
	NodeModeFiles = "files"
	// NodeModeDevices simulates only the GPUs (NVML, MIG, time slices):
	// the simulator creates real character devices with NVIDIA's numbers,
	// CDI edits come from nvcdi over a real driver root (libraries,
	// nvidia-cdi-hook hooks), and MPS daemons run that root's
	// nvidia-cuda-mps-control. The simulated NVML reports the root's
	// driver version, so nvcdi finds its libraries.
	NodeModeDevices = "devices"
)

// CheckNodeMode refuses an unknown node mode.
func CheckNodeMode(mode string) error {
	switch mode {
	case "", NodeModeFiles, NodeModeDevices:
		return nil
	}
	return fmt.Errorf("simulated node mode %q: use %s or %s", mode, NodeModeFiles, NodeModeDevices)
}

// openSimulatedDevices opens a simulated node in NodeModeDevices.
func openSimulatedDevices(o Options) (*Backend, error) {
	root := o.DriverRoot
	if root == "" {
		root = "/"
	}
	version, err := DriverVersionIn(root)
	if err != nil {
		return nil, err
	}
	profile, err := simulate.ParseProfile(o.SimulateProfile)
	if err != nil {
		return nil, err
	}
	sim, err := simulate.New(profile, o.NodeName, filepath.Join(o.StateDir, "simulated"))
	if err != nil {
		return nil, err
	}
	sim.DriverVersion, sim.NvmlVersion = version, "12."+version
	if cuda, ok := cudaVersionOf(version); ok {
		sim.CudaDriverVersion = cuda
	}
	if err := sim.MakeDeviceNodes(); err != nil {
		return nil, err
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		return nil, fmt.Errorf("discover simulated GPUs: %w", err)
	}
	hook, err := resolveHook(o)
	if err != nil {
		return nil, err
	}
	// The dev root is the simulator's, in the state directory, which the
	// plugin's container mounts at the host's path: containerd finds the
	// nodes at the same paths.
	edits, err := cdi.NewNvcdiEdits(sim, cdi.NvcdiOptions{
		DriverRoot: root, HostDriverRoot: o.HostDriverRoot, DevRoot: sim.DevRoot(),
		ProcRoot: sim.ProcRoot(), HookPath: hook,
	})
	if err != nil {
		return nil, err
	}
	// MPS daemons run in pods (NVIDIA's control daemon from the driver
	// root), as on real GPUs: no local launcher.
	return &Backend{NVML: sim, Inventory: inv, Edits: edits, Simulator: sim, TimeSlicer: sim, BootIDFile: sim.BootIDPath(),
		VFIO: sim.VFIO(), VFIODevDir: filepath.Join(sim.Dir, "dev", "vfio")}, nil
}

// nvmlLibDirs are where driver roots keep libnvidia-ml: Debian/Ubuntu's
// multiarch directory and Debian's nvidia/current, RPM distributions' lib64.
var nvmlLibDirs = []string{
	"usr/lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu/nvidia/current", "lib/x86_64-linux-gnu",
	"usr/lib64", "usr/lib", "usr/lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu/nvidia/current",
}

var nvmlVersioned = regexp.MustCompile(`^libnvidia-ml\.so\.([0-9]+\.[0-9]+(\.[0-9]+)?)$`)

// DriverVersionIn returns the version of the NVIDIA driver installed under
// root, from the name of its libnvidia-ml.so.<version>.
func DriverVersionIn(root string) (string, error) {
	var found []string
	for _, dir := range nvmlLibDirs {
		entries, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range entries {
			if m := nvmlVersioned.FindStringSubmatch(e.Name()); m != nil {
				found = append(found, m[1])
			}
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no libnvidia-ml.so.<version> under the driver root %s (looked in %v); the devices node mode needs NVIDIA's userspace there (hack/nvidia-userspace.sh)", root, nvmlLibDirs)
	}
	sort.Strings(found)
	if found[0] != found[len(found)-1] {
		return "", fmt.Errorf("driver root %s holds libnvidia-ml of several versions: %v", root, found)
	}
	return found[0], nil
}

// cudaVersions is the CUDA driver API version of each driver branch
// (NVIDIA's CUDA toolkit release notes, table 3).
var cudaVersions = map[int]int{535: 12020, 545: 12030, 550: 12040, 555: 12050, 560: 12060, 565: 12070, 570: 12080, 575: 12090, 580: 13000}

func cudaVersionOf(driver string) (int, bool) {
	var branch int
	if _, err := fmt.Sscanf(driver, "%d.", &branch); err != nil {
		return 0, false
	}
	v, ok := cudaVersions[branch]
	return v, ok
}
