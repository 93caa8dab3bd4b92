// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// A process may use a MIG device only if it can open, besides the parent
// GPU's /dev/nvidiaN, the nvidia-caps device nodes of the device's GPU
// instance and compute instance. The kernel driver describes each
// capability in a procfs file:
//
//	/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<GI>/access
//	/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<GI>/ci<CI>/access
//
//	DeviceFileMinor: 12
//	DeviceFileMode: 292
//	DeviceFileModify: 1
//
// and the node is /dev/nvidia-caps/nvidia-cap<DeviceFileMinor>, a
// character device of the "nvidia-caps" major in /proc/devices (NVIDIA's
// MIG user guide, "Device Nodes and Capabilities"). The nodes need not
// exist on the host: a fully specified CDI device node (type, major,
// minor) is created in the container by the runtime, and the cgroup rule
// for it is added.
//
// Only the two instance capabilities are handed out. The global mig/config
// capability would let a workload create and destroy MIG instances on
// every GPU of the node, and mig/monitor lets it observe all of them;
// neither NVIDIA's container toolkit (only on NVIDIA_MIG_CONFIG_DEVICES /
// NVIDIA_MIG_MONITOR_DEVICES) nor its DRA driver gives them to MIG
// workloads.

const (
	capabilitiesDir = "driver/nvidia/capabilities"
	capsDeviceName  = "nvidia-caps"
	capsDevDir      = "/dev/nvidia-caps"
)

// MigCapDeviceNodes returns the device nodes of the GPU instance gi and
// compute instance ci on the GPU with the given minor, read below procRoot
// (where procfs is mounted, normally /proc).
func MigCapDeviceNodes(procRoot string, gpuMinor, gi, ci int) ([]*cdispec.DeviceNode, error) {
	major, err := charDeviceMajor(filepath.Join(procRoot, "devices"), capsDeviceName)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(procRoot, capabilitiesDir, fmt.Sprintf("gpu%d", gpuMinor), "mig", fmt.Sprintf("gi%d", gi))
	var nodes []*cdispec.DeviceNode
	for _, file := range []string{
		filepath.Join(dir, "access"),
		filepath.Join(dir, fmt.Sprintf("ci%d", ci), "access"),
	} {
		c, err := readCapability(file)
		if err != nil {
			return nil, err
		}
		node := &cdispec.DeviceNode{
			Path:  fmt.Sprintf("%s/nvidia-cap%d", capsDevDir, c.minor),
			Type:  "c",
			Major: major,
			Minor: c.minor,
		}
		if c.mode != 0 {
			mode := os.FileMode(c.mode).Perm()
			node.FileMode = &mode
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

type capability struct {
	minor int64
	mode  uint32
}

// maxProcFile caps what is read of a procfs file (capfile: procfs files
// are regular and report size 0; a simulated root is a directory anyone
// may have put anything into).
const maxProcFile = 64 << 10

// readCapability parses one procfs capability file.
func readCapability(path string) (capability, error) {
	data, err := capfile.Read(path, maxProcFile)
	if err != nil {
		return capability{}, fmt.Errorf("MIG capability: %w", err)
	}
	var c capability
	found := false
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		key, value, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "DeviceFileMinor":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return capability{}, fmt.Errorf("MIG capability %s: bad DeviceFileMinor %q", path, value)
			}
			c.minor, found = n, true
		case "DeviceFileMode":
			n, err := strconv.ParseUint(value, 10, 32)
			if err != nil {
				return capability{}, fmt.Errorf("MIG capability %s: bad DeviceFileMode %q", path, value)
			}
			c.mode = uint32(n)
		}
	}
	if err := s.Err(); err != nil {
		return capability{}, fmt.Errorf("MIG capability %s: %w", path, err)
	}
	if !found {
		return capability{}, fmt.Errorf("MIG capability %s: no DeviceFileMinor", path)
	}
	return c, nil
}

// charDeviceMajor finds a character device's major number in
// /proc/devices.
func charDeviceMajor(procDevices, name string) (int64, error) {
	data, err := capfile.Read(procDevices, maxProcFile)
	if err != nil {
		return 0, fmt.Errorf("find the %s device major: %w", name, err)
	}
	inChar := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "Character devices:":
			inChar = true
			continue
		case strings.HasSuffix(line, "devices:"):
			inChar = false
			continue
		}
		fields := strings.Fields(line)
		if inChar && len(fields) == 2 && fields[1] == name {
			return strconv.ParseInt(fields[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("find the %s device major: not in %s (is the NVIDIA driver loaded?)", name, procDevices)
}
