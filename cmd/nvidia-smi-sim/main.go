// Command nvidia-smi-sim stands in for nvidia-smi inside containers that
// were given simulated GPUs. It lists the simulated device files the CDI
// spec mounted at /dev/nvidiaN (each holds "<uuid>\t<product name>") in the
// format of `nvidia-smi -L`. It is built static so it runs in any image.
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
	for i, g := range gpus {
		fmt.Printf("GPU %d: %s (UUID: %s)\n", i, g.model, g.uuid)
	}
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
