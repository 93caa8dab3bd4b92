// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package migpacking measures how well pod-by-pod allocation packs one
// dynamic-MIG GPU: for every layout of MIG profiles that fits the GPU in a
// single claim, it allocates every distinct arrival order of the layout's
// devices, one claim per device, with the scheduler's structured allocator
// over the slices the plugin publishes, and counts the orders that are
// allocated in full. The placement order in the slices decides the figure
// (pkg/resourceslices/packing.go).
package migpacking

import (
	"fmt"
	"os"
	"path/filepath"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// Models are the MIG-capable simulated models the benchmark covers by default.
var Models = []string{"a100-40gb", "a100-80gb", "a30", "h100", "h200"}

// Order is the device order the allocator sees.
type Order string

const (
	// Published is the order the plugin publishes.
	Published Order = "published"
	// Ascending is the order before issue 11 (and NVIDIA's DRA driver's):
	// the whole GPU, then each profile's placements in NVML's ascending
	// order. It is kept to measure the published order against.
	Ascending Order = "ascending"
)

// Options select what Run measures.
type Options struct {
	Order Order
	// MaxDevices limits layouts to at most this many MIG devices (0: no
	// limit), for a quicker run.
	MaxDevices int
}

// Layout is one multiset of MIG profiles that fits the GPU.
type Layout struct {
	// Profiles holds one entry per device, in the published profile order.
	Profiles []string
	// Orders is the number of distinct arrival orders; Fitted those whose
	// every claim was allocated.
	Orders, Fitted int64
}

// Report is one model's result.
type Report struct {
	Model   string
	Product string
	Order   Order
	Layouts []Layout
	// Allocations is how many single-claim allocations the run made.
	Allocations int
}

// Run measures one model (a simulated model name such as "a100-80gb").
func Run(t schedtest.T, model string, o Options) (Report, error) {
	if o.Order == "" {
		o.Order = Published
	}
	if o.Order != Published && o.Order != Ascending {
		return Report{}, fmt.Errorf("order %q: want %q or %q", o.Order, Published, Ascending)
	}
	inv, err := discover(model)
	if err != nil {
		return Report{}, err
	}
	res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
	if o.Order == Ascending {
		res = ascending(res, inv.GPUs[0])
	}
	r := &run{cluster: schedtest.New(t, "gpu.nvidia.com", "n1", res), maxDevices: o.MaxDevices}
	r.profiles, r.placements = migProfiles(res)
	rep := Report{Model: model, Product: inv.GPUs[0].ProductName, Order: o.Order}
	for _, counts := range r.layouts() {
		l := Layout{Orders: multinomial(counts)}
		for p, n := range counts {
			for i := 0; i < n; i++ {
				l.Profiles = append(l.Profiles, r.profiles[p])
			}
		}
		l.Fitted = r.arrivals(counts)
		rep.Layouts = append(rep.Layouts, l)
	}
	rep.Allocations = r.allocations
	return rep, nil
}

// discover simulates one GPU of the model, in MIG mode where the driver
// offers it for dynamic MIG only then (Ampere: an admin turns it on).
func discover(model string) (*nvdev.Inventory, error) {
	dir, err := os.MkdirTemp("", "migpacking-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, suffix := range []string{"", simulate.MigSuffix} {
		_, inv, err := simulate.Discover(model+"x1"+suffix, "n1", filepath.Join(dir, "sim"+suffix))
		if err != nil {
			return nil, err
		}
		if resourceslices.ModeOf(inv.GPUs[0], resourceslices.Options{DynamicMIG: true}) == resourceslices.DynamicMIG {
			return inv, nil
		}
	}
	return nil, fmt.Errorf("model %q: no dynamic MIG (not MIG-capable)", model)
}

type run struct {
	cluster     *schedtest.Cluster
	profiles    []string // in published order
	placements  []int    // per profile
	maxDevices  int
	allocations int
}

// migProfiles lists the MIG profiles in the order their first device is
// published, with their number of placements.
func migProfiles(res resourceslice.DriverResources) ([]string, []int) {
	var names []string
	index := map[string]int{}
	var counts []int
	for _, s := range res.Pools["n1"].Slices {
		for _, d := range s.Devices {
			if *d.Attributes[deviceattr.AttrType].StringValue != deviceattr.TypeMIG {
				continue
			}
			p := *d.Attributes[deviceattr.AttrProfile].StringValue
			i, ok := index[p]
			if !ok {
				i = len(names)
				index[p] = i
				names = append(names, p)
				counts = append(counts, 0)
			}
			counts[i]++
		}
	}
	return names, counts
}

func request(name, profile string, count int) resourceapi.DeviceRequest {
	return schedtest.Request(name, "mig.nvidia.com", int64(count), fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", profile))
}

// fits asks for the whole layout in one claim, where the allocator tries
// every combination of placements, and gives the devices back. One request
// per profile, largest first, keeps the allocator's backtracking short: it
// tries combinations of a request's devices rather than permutations, and
// the few large placements prune the many small ones.
func (r *run) fits(counts []int) bool {
	var reqs []resourceapi.DeviceRequest
	for p := len(counts) - 1; p >= 0; p-- {
		if counts[p] > 0 {
			reqs = append(reqs, request(fmt.Sprintf("r%d", p), r.profiles[p], counts[p]))
		}
	}
	r.allocations++
	got := r.cluster.Allocate(schedtest.Claim("layout", reqs...))
	r.cluster.Deallocate(got)
	return got != nil
}

// layouts enumerates every non-empty multiset that fits. A multiset that
// does not fit has no superset that fits, so each profile's count stops
// growing at the first that does not.
func (r *run) layouts() [][]int {
	var out [][]int
	counts := make([]int, len(r.profiles))
	var rec func(p, devices int)
	rec = func(p, devices int) {
		if p == len(counts) {
			if devices > 0 {
				out = append(out, append([]int(nil), counts...))
			}
			return
		}
		for n := 0; n <= r.placements[p]; n++ {
			if r.maxDevices > 0 && devices+n > r.maxDevices {
				break
			}
			counts[p] = n
			if n > 0 && !r.fits(counts) {
				break
			}
			rec(p+1, devices+n)
		}
		counts[p] = 0
	}
	rec(0, 0)
	return out
}

// arrivals allocates every distinct arrival order of the remaining counts,
// one single-device claim at a time, and returns how many were allocated
// in full. Orders sharing a prefix share its allocations; when a claim
// finds no device, every order that starts with that prefix fails.
func (r *run) arrivals(counts []int) int64 {
	var fitted int64
	done := true
	for p, n := range counts {
		if n == 0 {
			continue
		}
		done = false
		r.allocations++
		got := r.cluster.Allocate(schedtest.Claim("pod", request("mig", r.profiles[p], 1)))
		if got == nil {
			continue
		}
		counts[p]--
		fitted += r.arrivals(counts)
		counts[p]++
		r.cluster.Deallocate(got)
	}
	if done {
		return 1
	}
	return fitted
}

// multinomial is the number of distinct orders of a multiset.
func multinomial(counts []int) int64 {
	var out int64 = 1
	k := int64(0)
	for _, n := range counts {
		for i := 1; i <= n; i++ {
			k++
			out = out * k / int64(i)
		}
	}
	return out
}

// ascending reorders a single-GPU node's devices as the plugin published
// them before issue 11: the whole GPU, then the profiles in NVML's order,
// each with its placements in NVML's (ascending) order. Slice sizes stay.
func ascending(res resourceslice.DriverResources, g *nvdev.GPU) resourceslice.DriverResources {
	pool := res.Pools["n1"]
	byName := map[string]resourceapi.Device{}
	for _, s := range pool.Slices {
		for _, d := range s.Devices {
			byName[d.Name] = d
		}
	}
	var order []resourceapi.Device
	if d, ok := byName[deviceattr.GPUDeviceName(g.Minor)]; ok {
		order = append(order, d)
	}
	for _, p := range g.MigProfiles {
		for _, pl := range p.Placements {
			order = append(order, byName[resourceslices.DynamicMigDeviceName(g.Minor, p, pl.Start)])
		}
	}
	// Devices that are neither the GPU nor its MIG devices (the GPU's
	// monitor device) keep their published place after them.
	placed := map[string]bool{}
	for _, d := range order {
		placed[d.Name] = true
	}
	for _, s := range pool.Slices {
		for _, d := range s.Devices {
			if !placed[d.Name] {
				order = append(order, d)
			}
		}
	}
	out := resourceslice.Pool{}
	for _, s := range pool.Slices {
		n := len(s.Devices)
		s.Devices = append([]resourceapi.Device(nil), order[:n]...)
		order = order[n:]
		out.Slices = append(out.Slices, s)
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": out}}
}
