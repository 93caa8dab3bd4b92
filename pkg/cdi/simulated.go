// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"fmt"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// SimulatedEdits exposes simulated GPUs: their device files are
// bind-mounted where real device nodes would be, and a static nvidia-smi
// stand-in lists the GPUs it finds there, so unchanged GPU manifests show
// which GPU a container got.
type SimulatedEdits struct {
	// DevicePath returns the host file standing in for /dev/nvidia<minor>.
	DevicePath func(minor int) string
	// ControlDevicePath is the host file standing in for /dev/nvidiactl.
	ControlDevicePath string
	// MigDevicePath returns the host file standing in for a MIG device.
	MigDevicePath func(uuid string) string
	// NvidiaSmiPath is the host path of the nvidia-smi stand-in; empty to
	// leave it out.
	NvidiaSmiPath string
}

// MigDir is where simulated MIG device files appear in a container.
const MigDir = "/dev/nvidia-mig"

var roBind = []string{"ro", "nosuid", "nodev", "bind"}

// ForClaim implements Edits.
func (s SimulatedEdits) ForClaim(devices []Device) (cdispec.ContainerEdits, error) {
	uuids := make([]string, 0, len(devices))
	for _, d := range devices {
		uuids = append(uuids, d.UUID)
	}
	edits := cdispec.ContainerEdits{
		Env: []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")},
		Mounts: []*cdispec.Mount{
			{HostPath: s.ControlDevicePath, ContainerPath: "/dev/nvidiactl", Options: roBind},
		},
	}
	if s.NvidiaSmiPath != "" {
		edits.Mounts = append(edits.Mounts, &cdispec.Mount{HostPath: s.NvidiaSmiPath, ContainerPath: "/usr/bin/nvidia-smi", Options: roBind})
	}
	return edits, nil
}

// ForDevice implements Edits. A MIG device also gets its parent's device
// file, as real MIG containers get the parent's /dev/nvidiaN.
func (s SimulatedEdits) ForDevice(d Device) (cdispec.ContainerEdits, error) {
	edits := cdispec.ContainerEdits{
		Mounts: []*cdispec.Mount{{
			HostPath:      s.DevicePath(d.Minor),
			ContainerPath: fmt.Sprintf("/dev/nvidia%d", d.Minor),
			Options:       roBind,
		}},
	}
	if d.ParentUUID != "" {
		if s.MigDevicePath == nil || d.UUID == "" {
			return edits, fmt.Errorf("MIG device %s has no simulated device file", d.Name)
		}
		edits.Mounts = append(edits.Mounts, &cdispec.Mount{
			HostPath: s.MigDevicePath(d.UUID), ContainerPath: MigDir + "/" + d.UUID, Options: roBind,
		})
	}
	return edits, nil
}
