// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dcgmview resolves the DRA devices of a node's containers to GPU
// and MIG identities the way NVIDIA's dcgm-exporter does with
// --kubernetes-enable-dra: from the kubelet's PodResources API and the
// ResourceSlices. It is written from the exporter's rules, not from this
// driver's own naming code, so a test can hold what this driver publishes
// against what the exporter would make of it.
//
// The rules are those of NVIDIA/dcgm-exporter internal/pkg/transformation
// (kubernetes.go and dra.go). Its main branch at d5e5f51 (2026-05-12) reads
// only the attributes (dra.go, DRAResourceSliceManager.onAddOrUpdate); the
// newer dra.go adds the device-name parse for dynamic MIG devices
// (buildDeviceMapping, parseDRAMigSpec). Both are followed here: the name
// is read only where the attributes leave a MIG device without a uuid.
package dcgmview

import (
	"regexp"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
)

// DriverName is the only DRA driver whose devices the exporter maps
// (internal/pkg/transformation/const.go, DRAGPUDriverName; kubernetes.go,
// PodMapper.toDeviceToPodsDRA skips every other driver's claim resources).
const DriverName = "gpu.nvidia.com"

// The device attributes the exporter reads, by the names NVIDIA's reference
// driver publishes (dra.go, makeV1Lookup and buildDeviceMapping).
const (
	attrType       = "type"
	attrUUID       = "uuid"
	attrParentUUID = "parentUUID"
	attrProfile    = "profile"
)

// dynamicMigName is the exporter's pattern for a dynamic MIG device's name
// (dra.go, draDynamicMIGNameRegex, applied by parseDRAMigSpec): the parent's
// minor, the GPU instance profile ID and the placement start, NVIDIA's
// reference driver's naming.
var dynamicMigName = regexp.MustCompile(`^gpu-(\d+)-mig-.+-(\d+)-(\d+)$`)

// Identity is what the exporter attributes a DRA device to.
type Identity struct {
	// Type is the device's type attribute: "gpu" or "mig".
	Type string
	// GPUUUID is the GPU the metrics are keyed by: the device's own uuid for
	// a GPU (whole or a share of one), the parent's for a MIG device
	// (buildDeviceMapping returns parentUUID as the mapping key).
	GPUUUID string
	// MIGUUID is a MIG device's uuid attribute; empty where the slice has
	// none (a dynamic MIG device: it has no UUID until it exists).
	MIGUUID string
	// Profile is a MIG device's profile attribute ("1g.10gb").
	Profile string
	// Dynamic is what the exporter reads from the name of a MIG device
	// without a uuid; nil where it reads nothing (a name of another form,
	// or a MIG device with a uuid, whose name it never parses).
	Dynamic *MigSpec
}

// MigSpec is what the exporter reads from a dynamic MIG device's name
// (dra.go, draMIGSpec).
type MigSpec struct {
	ParentMinor    uint32
	GIProfileID    uint32
	PlacementStart uint32
}

// ParseDynamicMigName reads a device name by the exporter's pattern; ok is
// false where the pattern does not match or a number overflows 32 bits
// (parseDRAMigSpec fails then).
func ParseDynamicMigName(name string) (MigSpec, bool) {
	m := dynamicMigName.FindStringSubmatch(name)
	if m == nil {
		return MigSpec{}, false
	}
	var v [3]uint32
	for i := range v {
		n, err := strconv.ParseUint(m[i+1], 10, 32)
		if err != nil {
			return MigSpec{}, false
		}
		v[i] = uint32(n)
	}
	return MigSpec{ParentMinor: v[0], GIProfileID: v[1], PlacementStart: v[2]}, true
}

// Index is the exporter's view of the ResourceSlices: the devices of
// DriverName by pool and name, from each pool's newest complete generation
// only (dra.go, makeV1Lookup and latestV1PoolGeneration: a device of an
// older generation, or of a pool whose newest generation is not complete
// yet, resolves to nothing).
type Index struct {
	devices map[string]resourceapi.Device // pool + "/" + device
}

// NewIndex indexes the slices as the exporter's informer sees them.
func NewIndex(slices []resourceapi.ResourceSlice) Index {
	type gen struct{ generation, seen, want int64 }
	newest := map[string]*gen{}
	for _, s := range slices {
		if s.Spec.Driver != DriverName {
			continue
		}
		p := s.Spec.Pool
		g := newest[p.Name]
		switch {
		case g == nil || p.Generation > g.generation:
			newest[p.Name] = &gen{generation: p.Generation, seen: 1, want: p.ResourceSliceCount}
		case p.Generation == g.generation:
			g.seen++
		}
	}
	ix := Index{devices: map[string]resourceapi.Device{}}
	for _, s := range slices {
		g := newest[s.Spec.Pool.Name]
		if s.Spec.Driver != DriverName || g == nil || s.Spec.Pool.Generation != g.generation || g.want <= 0 || g.seen < g.want {
			continue
		}
		for _, d := range s.Spec.Devices {
			ix.devices[s.Spec.Pool.Name+"/"+d.Name] = d
		}
	}
	return ix
}

// Resolve is the exporter's identity of a pool's device; ok is false where
// it attributes the device to no GPU (unknown device, unknown type, a GPU
// without a uuid, a MIG device without a parentUUID), and the exporter then
// skips it (toDeviceToPodsDRA: "No UUID for ...").
func (ix Index) Resolve(pool, device string) (Identity, bool) {
	d, found := ix.devices[pool+"/"+device]
	if !found || d.Attributes == nil {
		return Identity{}, false
	}
	str := func(name resourceapi.QualifiedName) string {
		if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	// dra.go, buildDeviceMapping: by the type attribute.
	id := Identity{Type: str(attrType)}
	switch id.Type {
	case "gpu":
		id.GPUUUID = str(attrUUID)
	case "mig":
		id.GPUUUID, id.MIGUUID, id.Profile = str(attrParentUUID), str(attrUUID), str(attrProfile)
		// Only a MIG device without a uuid has its name parsed; a failed
		// parse leaves the device attributed to its parent alone.
		if id.MIGUUID == "" {
			if spec, ok := ParseDynamicMigName(d.Name); ok {
				id.Dynamic = &spec
			}
		}
	default:
		return Identity{}, false
	}
	return id, id.GPUUUID != ""
}
