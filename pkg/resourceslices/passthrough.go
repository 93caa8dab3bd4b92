// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Passthrough (docs/passthrough.md). A GPU offered for passthrough is
// published a second time as a device of type "vfio", which prepare binds
// to vfio-pci for a virtual machine. The scheduler must never hand the GPU
// out both ways, so every device of such a GPU that uses it consumes
// counters of one counter set of that GPU, and the vfio device consumes
// all of them:
//
//   - dynamic MIG: the GPU's MIG counter set, which the whole GPU already
//     consumes in full; the vfio device does the same.
//   - whole: a set with one counter, "gpu" = 1, that both consume.
//   - shareable (memory fractions): "gpu" = the GPU's memory in GiB (the
//     most shares it can hold, MemoryStep each); a share consumes 1, the
//     vfio device all of it. Consumable shares the same, with the share
//     count in integer mode (passthroughShares).
//
// Monitor devices consume nothing, as everywhere (monitor.go: the
// allocator would otherwise keep admin access off a busy GPU). Admin
// access cannot watch a GPU that a VM owns, though (NVML does not see it):
// prepare refuses a monitor claim while the GPU is passed through and a
// passthrough while a monitor claim holds the GPU (pkg/prepare). GPUs with
// static MIG devices are not offered: their MIG layout is an admin's.

const (
	counterGPU   = "gpu"
	gibibyteBits = 30
)

// PassthroughSelector says which GPUs are offered for passthrough: all of
// them, or those named by PCI address ("0000:3b:00.0") or minor ("3").
type PassthroughSelector struct {
	All   bool
	Names []string
}

func (p PassthroughSelector) selects(g *nvdev.GPU) bool {
	return p.All || slices.Contains(p.Names, g.PCIBusID) || slices.Contains(p.Names, strconv.Itoa(g.Minor))
}

// Unmatched are the names that select none of inv's GPUs, so that a typo
// in --passthrough-gpus fails start instead of offering nothing.
func (p PassthroughSelector) Unmatched(inv *nvdev.Inventory) []string {
	var out []string
	for _, n := range p.Names {
		if !slices.ContainsFunc(inv.GPUs, func(g *nvdev.GPU) bool { return n == g.PCIBusID || n == strconv.Itoa(g.Minor) }) {
			out = append(out, n)
		}
	}
	return out
}

// passthroughOffered reports whether g, published in mode m, also gets a
// vfio device: selected (or held for a VM: Options.HeldPassthrough), with
// a PCI address, and used whole in that mode.
func passthroughOffered(g *nvdev.GPU, m Mode, o Options) bool {
	return (o.Passthrough.selects(g) || o.HeldPassthrough[g.UUID]) && g.PCIBusID != "" && m != StaticMIG && WholeGPUPublished(g, m)
}

// vfioDevice builds the passthrough device of g: what a VM and KubeVirt
// need to find it (PCI address, root, NUMA node, IOMMU group), what users
// select on (product name, memory), and no uuid: the VM's driver, not
// this node's, will see the GPU.
func vfioDevice(inv *nvdev.Inventory, g *nvdev.GPU) resourceapi.Device {
	attrs := commonAttributes(inv, g)
	// The VM's driver, not this node's, runs the GPU, and its host's
	// memory addressing is not this node's either.
	delete(attrs, deviceattr.AttrDriverVersion)
	delete(attrs, deviceattr.AttrCudaDriverVersion)
	delete(attrs, deviceattr.AttrAddressingMode)
	attrs[deviceattr.AttrType] = str(deviceattr.TypeVFIO)
	attrs[deviceattr.AttrUUID] = str(g.UUID)
	attrs[deviceattribute.StandardDeviceAttributePCIBusID] = str(g.PCIBusID)
	if g.IOMMUGroup != "" {
		attrs[deviceattr.AttrIOMMUGroup] = str(g.IOMMUGroup)
	}
	return resourceapi.Device{
		Name:       deviceattr.VFIODeviceName(g.Minor),
		Attributes: attrs,
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			deviceattr.CapMemory: {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
		},
	}
}

// gpuCounterSet is the counter set of a whole or shareable passthrough GPU;
// shares is the most shares a shareable one holds (passthroughShares).
func gpuCounterSet(g *nvdev.GPU, m Mode, shares int64) resourceapi.CounterSet {
	n := int64(1)
	if m == Shareable {
		n = shares
	}
	return resourceapi.CounterSet{Name: counterSetName(g.Minor), Counters: map[string]resourceapi.Counter{counterGPU: counter(n)}}
}

// consumeAll is a consumption of every counter of set.
func consumeAll(set resourceapi.CounterSet) []resourceapi.DeviceCounterConsumption {
	all := make(map[string]resourceapi.Counter, len(set.Counters))
	for name, c := range set.Counters {
		all[name] = c
	}
	return []resourceapi.DeviceCounterConsumption{{CounterSet: set.Name, Counters: all}}
}

// addPassthrough gives the entries of g (made for mode m, the last n of
// t.Entries) their counter consumption where the mode has none yet, and
// appends g's vfio device. set is g's MIG counter set under dynamic MIG;
// shares is gpuCounterSet's.
func (t *Table) addPassthrough(inv *nvdev.Inventory, g *nvdev.GPU, m Mode, set *resourceapi.CounterSet, shares int64) {
	if set == nil {
		s := gpuCounterSet(g, m, shares)
		t.CounterSets = append(t.CounterSets, s)
		set = &s
		for i := range t.Entries {
			e := &t.Entries[i]
			if e.GPU != g || e.Kind == configapi.Monitor {
				continue
			}
			c := consumeAll(*set)
			if m == Shareable {
				c[0].Counters[counterGPU] = counter(1)
			}
			e.Device.ConsumesCounters = c
		}
	}
	d := vfioDevice(inv, g)
	d.ConsumesCounters = consumeAll(*set)
	t.Entries = append(t.Entries, Entry{Device: d, Kind: configapi.VFIO, GPU: g})
}

// CheckPassthrough reports a GPU selected for passthrough that cannot be
// offered, so that start can say why.
func CheckPassthrough(inv *nvdev.Inventory, o Options) []error {
	var errs []error
	for _, g := range inv.GPUs {
		if !o.Passthrough.selects(g) {
			continue
		}
		if m := ModeOf(g, o); !passthroughOffered(g, m, o) {
			errs = append(errs, fmt.Errorf("GPU %d (%s) is not offered for passthrough: it has static MIG devices, MIG mode on, or no PCI address", g.Minor, g.PCIBusID))
		}
	}
	return errs
}
