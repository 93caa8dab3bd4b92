// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fleetview answers, for a whole fleet, what `kubectl describe node`
// answered with the device plugin: which GPUs are free, which are carved
// into which MIG devices, who holds them (`gpudra usage`), and how many
// more claims of a kind the fleet can take now (`gpudra capacity`). It works
// on a clusterview.Snapshot read with a few List calls, and counts with
// clusterview's Capacity, so every answer is a pure function tested without
// a cluster.
package fleetview

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// Use is how a GPU is used.
type Use string

const (
	Free     Use = "free"
	Whole    Use = "whole"    // one claim, one pod
	MIG      Use = "mig"      // carved into MIG devices
	Shared   Use = "shared"   // one claim's time-slicing or MPS, or several pods
	Fraction Use = "fraction" // memory shares of a shareable GPU
	// Passthrough: bound to vfio-pci for a virtual machine's claim.
	Passthrough Use = "passthrough"
)

// GPU is one physical GPU of the fleet and how it is used.
type GPU struct {
	Node        string   `json:"node"`
	Index       int      `json:"index"`
	UUID        string   `json:"uuid,omitempty"`
	Model       string   `json:"model"`
	MemoryBytes int64    `json:"memoryBytes"`
	Taints      []string `json:"taints,omitempty"` // key=value:Effect on the GPU or its MIG devices
	Use         Use      `json:"use"`
	Holders     []Holder `json:"holders,omitempty"`
	// MigSlices is the GPU's number of memory slices (MIG GPUs only).
	MigSlices int `json:"migSlices,omitempty"`
	// FractionUsedBytes is the memory the GPU's shares hold.
	FractionUsedBytes int64 `json:"fractionUsedBytes,omitempty"`
	// Monitors are admin-access claims on the GPU (monitoring agents);
	// they do not take it.
	Monitors []string `json:"monitors,omitempty"`
}

// Holder is one allocated device of the GPU and the claim holding it.
type Holder struct {
	Claim  string   `json:"claim"` // namespace/name
	Pods   []string `json:"pods,omitempty"`
	Device string   `json:"device"`
	// MIG placement, for MIG devices.
	Profile string `json:"profile,omitempty"`
	Start   int    `json:"start,omitempty"`
	Size    int    `json:"size,omitempty"`
	// Share of a shareable GPU.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	Compute     int64 `json:"computePercentage,omitempty"`
	// Sharing is the claim's time-slicing or MPS setting for the device.
	Sharing string `json:"sharing,omitempty"`
}

// Owner is who holds the device: its pods, or the claim when no pod
// reserves it (yet, or any more).
func (h Holder) Owner() string {
	if len(h.Pods) > 0 {
		return strings.Join(h.Pods, ",")
	}
	return h.Claim + " (claim, no pod)"
}

// Filter narrows the GPUs listed.
type Filter struct {
	Node      string // only this node's GPUs
	Namespace string // only GPUs with a holder in this namespace
}

// devRef is what a published device is to its GPU.
type devRef struct {
	gpu         string // node/uuid
	typ         string
	profile     string
	start, size int
	taints      []resourceapi.DeviceTaint
	memory      int64
	index       int
}

// Usage lists the GPUs of the snapshot's driver, sorted by node and index,
// with what holds each.
func Usage(s *clusterview.Snapshot, f Filter) []GPU {
	gpus := map[string]*GPU{}
	refs := map[string]*devRef{} // driver/pool/device
	slices := currentSlices(s)
	// A MIG device's GPU is its parentUUID; should that attribute be
	// missing, the parent's minor in the device's name finds the GPU by
	// its own device's name ("gpu-<minor>", or its monitor's).
	uuidByName := map[string]string{} // node/gpu-<minor> -> uuid
	for _, sl := range slices {
		for j := range sl.Spec.Devices {
			d := &sl.Spec.Devices[j]
			if uuid := attrString(s.DriverName, d, deviceattr.AttrUUID); uuid != "" {
				uuidByName[nodeOf(sl)+"/"+strings.TrimSuffix(d.Name, "-monitor")] = uuid
			}
		}
	}
	for _, sl := range slices {
		node := nodeOf(sl)
		if f.Node != "" && node != f.Node {
			continue
		}
		for j := range sl.Spec.Devices {
			d := &sl.Spec.Devices[j]
			r := describe(s.DriverName, node, d, uuidByName)
			if r == nil {
				continue
			}
			refs[sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+d.Name] = r
			// A claim allocated before dynamic MIG names carried the
			// profile ID holds the device by its older name, which the
			// node may no longer publish.
			if legacy, ok := deviceattr.LegacyMigDeviceName(d.Name); ok && r.typ == deviceattr.TypeMIG {
				if key := sl.Spec.Driver + "/" + sl.Spec.Pool.Name + "/" + legacy; refs[key] == nil {
					refs[key] = r
				}
			}
			g := gpus[r.gpu]
			if g == nil {
				g = &GPU{Node: node, Index: -1, Use: Free}
				gpus[r.gpu] = g
			}
			if r.typ != deviceattr.TypeMIG {
				g.UUID = attrString(s.DriverName, d, deviceattr.AttrUUID)
				if r.index >= 0 { // the passthrough device publishes no index
					g.Index, g.MemoryBytes = r.index, r.memory
				}
			} else if g.UUID == "" {
				g.UUID = strings.TrimPrefix(r.gpu, node+"/")
			}
			if m := attrString(s.DriverName, d, deviceattr.AttrProductName); m != "" {
				g.Model = m
			}
			if r.typ == deviceattr.TypeMIG {
				g.MigSlices = max(g.MigSlices, r.start+r.size)
			}
			for _, t := range r.taints {
				g.Taints = appendNew(g.Taints, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
			}
		}
	}
	for i := range s.Claims {
		cl := &s.Claims[i]
		a := cl.Status.Allocation
		if a == nil {
			continue
		}
		var pods []string
		for _, rf := range cl.Status.ReservedFor {
			if rf.Resource == "pods" {
				pods = append(pods, cl.Namespace+"/"+rf.Name)
			}
		}
		for _, res := range a.Devices.Results {
			r := refs[res.Driver+"/"+res.Pool+"/"+res.Device]
			if r == nil {
				continue
			}
			g := gpus[r.gpu]
			h := Holder{Claim: cl.Namespace + "/" + cl.Name, Pods: pods, Device: res.Device}
			if res.AdminAccess != nil && *res.AdminAccess || r.typ == deviceattr.TypeMonitor {
				g.Monitors = appendNew(g.Monitors, h.Owner())
				continue
			}
			h.Sharing = sharing(a.Devices.Config, s.DriverName, res.Request)
			switch {
			case r.typ == deviceattr.TypeMIG:
				h.Profile, h.Start, h.Size = r.profile, r.start, r.size
				g.Use = MIG
			case r.typ == deviceattr.TypeVFIO:
				g.Use = Passthrough
			case res.ShareID != nil:
				if q, ok := res.ConsumedCapacity[deviceattr.CapMemory]; ok {
					h.MemoryBytes = q.Value()
				}
				if q, ok := res.ConsumedCapacity[deviceattr.CapComputePercentage]; ok {
					h.Compute = q.Value()
				}
				g.FractionUsedBytes += h.MemoryBytes
				g.Use = Fraction
			case h.Sharing != "" || len(pods) > 1:
				g.Use = Shared
			default:
				g.Use = Whole
			}
			g.Holders = append(g.Holders, h)
		}
	}
	out := make([]GPU, 0, len(gpus))
	for _, g := range gpus {
		if g.Use == Whole && len(g.Holders) > 1 {
			g.Use = Shared // several claims on one GPU, as admin access allows
		}
		sort.Slice(g.Holders, func(a, b int) bool {
			if g.Holders[a].Start != g.Holders[b].Start {
				return g.Holders[a].Start < g.Holders[b].Start
			}
			return g.Holders[a].Device < g.Holders[b].Device
		})
		if f.Namespace != "" && !holdsIn(g, f.Namespace) {
			continue
		}
		out = append(out, *g)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Node != out[b].Node {
			return out[a].Node < out[b].Node
		}
		return out[a].Index < out[b].Index
	})
	return out
}

// describe reads what usage needs from one published device of the
// driver: the GPU it belongs to (by UUID; a MIG device by its parent's),
// its type, and for MIG devices their placement. Only the attributes that
// stay published (type, uuid, parentUUID, profile) are read; a MIG
// device's placement is read from its counters, and its profile falls
// back to its name.
func describe(driver, node string, d *resourceapi.Device, uuidByName map[string]string) *devRef {
	typ := attrString(driver, d, deviceattr.AttrType)
	r := &devRef{typ: typ, taints: d.Taints}
	switch typ {
	case deviceattr.TypeGPU, deviceattr.TypeMonitor, deviceattr.TypeVFIO:
		uuid := attrString(driver, d, deviceattr.AttrUUID)
		if uuid == "" {
			return nil
		}
		r.gpu = node + "/" + uuid
		r.index = int(attrInt(driver, d, deviceattr.AttrIndex, -1))
		if c, ok := d.Capacity[deviceattr.CapMemory]; ok {
			r.memory = c.Value.Value()
		}
	case deviceattr.TypeMIG:
		parent := attrString(driver, d, deviceattr.AttrParentUUID)
		name, ok := deviceattr.ParseMigDeviceName(d.Name)
		if parent == "" {
			if !ok {
				return nil
			}
			parent = uuidByName[node+"/"+deviceattr.GPUDeviceName(name.ParentMinor)]
			if parent == "" {
				parent = fmt.Sprintf("minor-%d", name.ParentMinor)
			}
		}
		r.gpu = node + "/" + parent
		r.profile = attrString(driver, d, deviceattr.AttrProfile)
		if r.profile == "" {
			r.profile = name.Profile
		}
		// A dynamic MIG device's placement is the memory slices it
		// consumes; a static one consumes none, and its name gives the
		// start.
		r.start, r.size = int(name.Start), 1
		if st, sz, ok := deviceattr.MigPlacement(d); ok {
			r.start, r.size = st, sz
		}
	default:
		return nil
	}
	return r
}

// sharing names the time-slicing or MPS setting of this driver's config
// that applies to a request ("" when none): the last config selecting it,
// as prepare resolves it (class configs come first in an allocation).
func sharing(configs []resourceapi.DeviceAllocationConfiguration, driver, request string) string {
	var chosen *configapi.Sharing
	for _, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != driver || !configapi.SelectsRequest(c.Requests, request) {
			continue
		}
		cfg, err := configapi.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			continue // prepare refuses it; usage only reports
		}
		chosen = cfg.GetSharing()
	}
	if chosen == nil {
		return ""
	}
	switch {
	case chosen.Strategy == configapi.TimeSlicingStrategy && chosen.TimeSlicingConfig != nil && chosen.TimeSlicingConfig.Interval != "":
		return fmt.Sprintf("time-slicing %s", chosen.TimeSlicingConfig.Interval)
	case chosen.Strategy == configapi.TimeSlicingStrategy:
		return "time-slicing"
	case chosen.Strategy == configapi.MpsStrategy:
		var limits []string
		if m := chosen.MpsConfig; m != nil {
			if m.DefaultActiveThreadPercentage != nil {
				limits = append(limits, fmt.Sprintf("%d%% threads", *m.DefaultActiveThreadPercentage))
			}
			if m.DefaultPinnedDeviceMemoryLimit != nil {
				limits = append(limits, m.DefaultPinnedDeviceMemoryLimit.String()+" pinned")
			}
		}
		if len(limits) == 0 {
			return "MPS"
		}
		return "MPS " + strings.Join(limits, " ")
	}
	return string(chosen.Strategy)
}

// currentSlices are the slices of each pool's newest generation, as the
// scheduler reads them.
func currentSlices(s *clusterview.Snapshot) []*resourceapi.ResourceSlice {
	gen := map[string]int64{}
	for i := range s.Slices {
		sl := &s.Slices[i]
		k := sl.Spec.Driver + "/" + sl.Spec.Pool.Name
		gen[k] = max(gen[k], sl.Spec.Pool.Generation)
	}
	var out []*resourceapi.ResourceSlice
	for i := range s.Slices {
		sl := &s.Slices[i]
		if sl.Spec.Driver == s.DriverName && sl.Spec.Pool.Generation == gen[sl.Spec.Driver+"/"+sl.Spec.Pool.Name] {
			out = append(out, sl)
		}
	}
	return out
}

func nodeOf(sl *resourceapi.ResourceSlice) string {
	if sl.Spec.NodeName != nil {
		return *sl.Spec.NodeName
	}
	return ""
}

func attrString(driver string, d *resourceapi.Device, name string) string {
	if a, ok := attr(driver, d, name); ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func attrInt(driver string, d *resourceapi.Device, name string, def int64) int64 {
	if a, ok := attr(driver, d, name); ok && a.IntValue != nil {
		return *a.IntValue
	}
	return def
}

// attr reads an attribute by its plain name or qualified with the
// driver's domain, as CEL does.
func attr(driver string, d *resourceapi.Device, name string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
		return a, true
	}
	a, ok := d.Attributes[resourceapi.QualifiedName(driver+"/"+name)]
	return a, ok
}

func holdsIn(g *GPU, namespace string) bool {
	for _, h := range g.Holders {
		if strings.HasPrefix(h.Claim, namespace+"/") {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// memString renders a memory size as Kubernetes quantities do ("80Gi").
func memString(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
