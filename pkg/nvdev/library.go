// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// libraryCandidates are where distributions install libnvidia-ml, relative
// to the driver root.
var libraryCandidates = []string{
	"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
	"/usr/lib64/libnvidia-ml.so.1",
	"/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
	"/usr/lib/libnvidia-ml.so.1",
}

// FindLibrary returns the libnvidia-ml path under driverRoot, or explicit
// when given. The error lists every path tried.
func FindLibrary(driverRoot, explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("NVML library %s: %w; check --nvml-library", explicit, err)
		}
		return explicit, nil
	}
	var tried []string
	for _, c := range libraryCandidates {
		p := filepath.Join(driverRoot, c)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("libnvidia-ml.so.1 not found under driver root %q (tried %v); check that the NVIDIA driver is installed, that --driver-root points at it (e.g. /run/nvidia/driver for the GPU operator), or pass --nvml-library, or use --simulate for a node without GPUs", driverRoot, tried)
}

// OpenNVML loads and initialises the real NVML library.
func OpenNVML(driverRoot, explicit string) (nvml.Interface, error) {
	path, err := FindLibrary(driverRoot, explicit)
	if err != nil {
		return nil, err
	}
	lib := nvml.New(nvml.WithLibraryPath(path))
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("initialise NVML from %s: %s; check that the kernel module is loaded (lsmod | grep nvidia) and /dev/nvidiactl exists", path, nvml.ErrorString(ret))
	}
	return lib, nil
}
