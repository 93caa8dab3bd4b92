// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// BenchmarkAllocateDynamicMIG is the scheduler's cost of one claim on an
// idle 8 x H100 node with dynamic MIG: the allocator looks at devices in
// published order until one matches, so the order sets the cost.
func BenchmarkAllocateDynamicMIG(b *testing.B) {
	inv := simulatedInventory(&testing.T{}, "h100x8")
	c := schedtest.New(b, driverName, "n1", resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true}))
	for _, bc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
	}{
		{"whole-gpu", schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))},
		{"1g.10gb", schedtest.Claim("small", migRequest("mig", "1g.10gb"))},
		{"3g.40gb", schedtest.Claim("large", migRequest("mig", "3g.40gb"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.Deallocate(c.Allocate(bc.claim))
			}
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// filterLayout is one of the node layouts `make bench-scale` runs, with the
// claim its pods make and how many such claims fill the node.
type filterLayout struct {
	name     string
	opts     resourceslices.Options
	claim    func(name string) *resourceapi.ResourceClaim
	capacity int
	// class is a DeviceClass the claim names beyond the shipped ones.
	class *resourceapi.DeviceClass
}

// FilterLayouts are BenchmarkFilterPerNode's layouts on 8 x H100.
func filterLayouts() []filterLayout {
	whole := func(n string) *resourceapi.ResourceClaim {
		return schedtest.Claim(n, schedtest.Request("gpu", "gpu.nvidia.com", 1))
	}
	mig1g := func(n string) *resourceapi.ResourceClaim { return schedtest.Claim(n, migRequest("mig", "1g.10gb")) }
	// The documented MIG path: the profile's class, no selector.
	class1g := static.MigProfileClass(driverName, "1g.10gb")
	mig1gClass := func(n string) *resourceapi.ResourceClaim {
		return schedtest.Claim(n, schedtest.Request("mig", class1g.Name, 1))
	}
	return []filterLayout{
		{"whole", resourceslices.Options{}, whole, 8, nil},
		{"whole-nomonitor", resourceslices.Options{NoMonitorDevices: true}, whole, 8, nil},
		{"mig-1g", resourceslices.Options{DynamicMIG: true}, mig1g, 56, nil},
		{"mig-1g-class", resourceslices.Options{DynamicMIG: true}, mig1gClass, 56, class1g},
		{"mig-whole", resourceslices.Options{DynamicMIG: true}, whole, 8, nil},
		{"mig3p-1g", resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.10gb", "3g.40gb", "7g.80gb"}}, mig1g, 56, nil},
		{"fraction-10gi", resourceslices.Options{FractionalMemory: true}, func(n string) *resourceapi.ResourceClaim { return memShare(n, "10Gi") }, 64, nil},
		// Consumable shares (consumable.go) with NVIDIA's claims: 4Gi
		// memory shares (20 per H100), one of 4 integer shares each, and
		// unlimited shares, of which 64 stand for a busy node (8 per GPU;
		// the allocator puts them all on gpu-0, the first that fits).
		{"shares-memory-4gi", sharesOn(resourceslices.SharesMemory), nvidiaClaim(schedtest.NVIDIAMemoryShare), 160, nil},
		{"shares-integer", sharesOn(resourceslices.SharesInteger), nvidiaClaim(schedtest.NVIDIAUnsizedShare), 32, nil},
		{"shares-unlimited", sharesOn(resourceslices.SharesUnlimited), nvidiaClaim(schedtest.NVIDIAUnsizedShare), 64, nil},
	}
}

// nvidiaClaim makes claims of one of NVIDIA's consumable-shares specs.
func nvidiaClaim(spec string) func(string) *resourceapi.ResourceClaim {
	return func(n string) *resourceapi.ResourceClaim { return schedtest.ClaimFromSpec(&testing.T{}, n, spec) }
}

// BenchmarkFilterPerNode is what one kube-scheduler Filter call costs per
// node and pod (1.37's allocator with its default features, as
// internal/schedtest sets them) for each layout `make bench-scale` runs, on
// an 8 x H100 node already holding fill% of what the layout can hold
// (claims allocated through the same allocator first, as the scheduler
// would have): the allocator converts every device of the node on every
// call and then looks at devices in published order until one fits, so a
// busy node costs more than an idle one. bench-scale's scheduler CPU per
// pod follows the ratios of these figures.
func BenchmarkFilterPerNode(b *testing.B) {
	inv := simulatedInventory(&testing.T{}, "h100x8")
	for _, l := range filterLayouts() {
		for _, fill := range []int{0, 50, 90} {
			b.Run(fmt.Sprintf("%s/fill=%d", l.name, fill), func(b *testing.B) {
				res := resourceslices.Build("n1", inv, l.opts)
				c := schedtest.New(b, driverName, "n1", res)
				if l.class != nil {
					c.Classes = append(c.Classes, l.class)
				}
				held := l.capacity * fill / 100
				for i := 0; i < held; i++ {
					if c.Allocate(l.claim(fmt.Sprintf("fill-%d", i))) == nil {
						b.Fatalf("%s: fill claim %d of %d did not fit", l.name, i+1, held)
					}
				}
				devices := 0
				for _, s := range res.Pools["n1"].Slices {
					devices += len(s.Devices)
				}
				claim := l.claim("timed")
				// Once untimed: the first call compiles the CEL
				// expressions, which the scheduler caches across pods.
				c.Deallocate(c.Allocate(claim))
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					r := c.Allocate(claim)
					if r == nil {
						b.Fatalf("%s at %d%%: the timed claim does not fit", l.name, fill)
					}
					c.Deallocate(r)
				}
				// CPU time (every thread of the process, the garbage
				// collector's included) is what a Filter call costs the
				// scheduler, and unlike ns/op it does not grow when other
				// processes share the machine's cores.
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(devices), "devices")
			})
		}
	}
}
