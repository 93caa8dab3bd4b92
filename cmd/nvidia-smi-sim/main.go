// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command nvidia-smi-sim stands in for nvidia-smi inside containers that
// were given simulated GPUs. It lists the simulated device files the CDI
// spec mounted at /dev/nvidiaN (each holds "<uuid>\t<product name>") and
// the MIG device files under /dev/nvidia-mig ("<uuid>\t<profile>\t<parent
// uuid>") in the format of `nvidia-smi -L`. It is built static so it runs
// in any image.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type gpu struct {
	minor       int
	uuid, model string
}

func main() {
	devDir := os.Getenv("NVIDIA_SMI_SIM_DEV_DIR")
	if devDir == "" {
		devDir = "/dev"
	}
	gpus, err := list(devDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(gpus) == 0 {
		fmt.Println("No devices were found")
		os.Exit(6)
	}
	migs := listMig(filepath.Join(devDir, "nvidia-mig"))
	for i, g := range gpus {
		fmt.Printf("GPU %d: %s (UUID: %s)\n", i, g.model, g.uuid)
		for j, m := range migs[g.uuid] {
			fmt.Printf("  MIG %-11s Device %2d: (UUID: %s)\n", m.profile, j, m.uuid)
		}
	}
}

type migDevice struct{ uuid, profile string }

// listMig groups the MIG device files by parent UUID.
func listMig(dir string) map[string][]migDevice {
	out := map[string][]migDevice{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		f := strings.Split(strings.TrimSpace(string(data)), "\t")
		if len(f) != 3 {
			continue
		}
		out[f[2]] = append(out[f[2]], migDevice{uuid: f[0], profile: f[1]})
	}
	return out
}

func list(devDir string) ([]gpu, error) {
	paths, err := filepath.Glob(filepath.Join(devDir, "nvidia[0-9]*"))
	if err != nil {
		return nil, err
	}
	var out []gpu
	for _, p := range paths {
		minor, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "nvidia"))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		uuid, model, ok := strings.Cut(strings.TrimSpace(string(data)), "\t")
		if !ok {
			continue
		}
		out = append(out, gpu{minor: minor, uuid: uuid, model: model})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].minor < out[b].minor })
	return out, nil
}
