// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

// RunInContainer applies the CDI devices to an OCI spec as containerd
// would, lays out the container's /dev from the spec's mounts, and runs the
// nvidia-smi stand-in against it.
func RunInContainer(cdiDir, containerDir, smi string, ids []string) (string, error) {
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return "", err
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, ids...); err != nil {
		return "", fmt.Errorf("CDI injection: %w", err)
	}
	devDir := filepath.Join(containerDir, "dev")
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return "", err
	}
	for _, m := range spec.Mounts {
		if strings.HasPrefix(m.Destination, "/dev/") {
			target := filepath.Join(devDir, strings.TrimPrefix(m.Destination, "/dev/"))
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return "", err
			}
			if err := os.Symlink(m.Source, target); err != nil {
				return "", err
			}
		}
	}
	cmd := exec.Command(smi, "-L")
	cmd.Env = append(spec.Process.Env, "NVIDIA_SMI_SIM_DEV_DIR="+devDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nvidia-smi stand-in %s: %w: %s (run make build first)", smi, err, out)
	}
	return string(out), nil
}
