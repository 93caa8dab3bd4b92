// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"path/filepath"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// VFIO is a passthrough device: a GPU bound to vfio-pci. A container that
// runs a VM (KubeVirt's virt-launcher) gets /dev/vfio/vfio, the IOMMU
// group's node, and the GPU's address in the environment, and nothing of
// the NVIDIA stack: the VM's own driver uses the GPU.
type VFIO struct {
	PCIBusID   string
	IOMMUGroup string
}

// VFIOOptions say how vfio devices reach containers.
type VFIOOptions struct {
	// SimulatedDevDir, when set, holds plain files standing in for
	// /dev/vfio/* (pkg/simulate): they are bind-mounted, as simulated GPU
	// device files are. Empty: real device nodes.
	SimulatedDevDir string
	// Resource names the environment variable PCI_RESOURCE_<RESOURCE>
	// (KubeVirt's convention for host devices from device plugins: the
	// resource name upper-cased, '.' and '/' as '_'), which carries the
	// claim's PCI addresses, comma-separated.
	Resource string
}

// EnvName is the environment variable that carries the addresses.
func (o VFIOOptions) EnvName() string {
	return "PCI_RESOURCE_" + strings.ToUpper(strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(o.Resource))
}

const vfioDir = "/dev/vfio"

// node is /dev/vfio/<name>: the host's device node, or the simulator's
// file bind-mounted there.
func (o VFIOOptions) node(name string) cdispec.ContainerEdits {
	path := vfioDir + "/" + name
	if o.SimulatedDevDir == "" {
		return cdispec.ContainerEdits{DeviceNodes: []*cdispec.DeviceNode{{Path: path}}}
	}
	return cdispec.ContainerEdits{Mounts: []*cdispec.Mount{{HostPath: filepath.Join(o.SimulatedDevDir, name), ContainerPath: path, Options: []string{"rw", "nosuid", "bind"}}}}
}

// vfioClaimEdits are what every container of a claim with vfio devices
// needs: the VFIO container node and the addresses.
func (o VFIOOptions) claimEdits(devices []Device) cdispec.ContainerEdits {
	edits := o.node("vfio")
	var addrs []string
	for _, d := range devices {
		addrs = append(addrs, d.VFIO.PCIBusID)
	}
	edits.Env = []string{o.EnvName() + "=" + strings.Join(addrs, ",")}
	return edits
}

// deviceEdits give one vfio device its IOMMU group's node.
func (o VFIOOptions) deviceEdits(d Device) cdispec.ContainerEdits {
	return o.node(d.VFIO.IOMMUGroup)
}

func mergeEdits(a, b cdispec.ContainerEdits) cdispec.ContainerEdits {
	a.Env = append(a.Env, b.Env...)
	a.DeviceNodes = append(a.DeviceNodes, b.DeviceNodes...)
	a.Mounts = append(a.Mounts, b.Mounts...)
	a.Hooks = append(a.Hooks, b.Hooks...)
	return a
}
