// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

func sharesOn(mode resourceslices.ShareMode, gpus ...int) resourceslices.Options {
	return resourceslices.Options{ConsumableShares: resourceslices.ConsumableShares{Mode: mode, GPUs: gpus, Count: resourceslices.DefaultShareCount}}
}

// policyOK applies the apiserver's rules for a request policy's range
// (k8s.io/kubernetes pkg/apis/resource/validation validateRequestPolicyRange):
// min <= default <= max <= value, and default and max whole steps from min.
func policyOK(t *testing.T, name resourceapi.QualifiedName, c resourceapi.DeviceCapacity) {
	t.Helper()
	p := c.RequestPolicy
	if p == nil || p.Default == nil || p.ValidRange == nil || p.ValidRange.Min == nil || p.ValidRange.Max == nil || p.ValidRange.Step == nil {
		t.Fatalf("%s: incomplete policy %+v", name, p)
	}
	r := p.ValidRange
	if p.Default.Cmp(*r.Min) < 0 || p.Default.Cmp(*r.Max) > 0 || r.Max.Cmp(c.Value) > 0 {
		t.Errorf("%s: default %s outside [%s, %s] or max above %s", name, p.Default.String(), r.Min.String(), r.Max.String(), c.Value.String())
	}
	for _, v := range []*resource.Quantity{p.Default, r.Max} {
		if (v.Value()-r.Min.Value())%r.Step.Value() != 0 {
			t.Errorf("%s: %s is no whole step (%s) from %s", name, v.String(), r.Step.String(), r.Min.String())
		}
	}
}

// Each mode publishes the chosen GPU with NVIDIA's capacities (names,
// defaults, steps: cmd/gpu-kubelet-plugin/consumable_shares.go at
// 95932046) and leaves the other whole.
func TestConsumableShareSlicesPerMode(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	for _, tc := range []struct {
		mode                       resourceslices.ShareMode
		memDefault, memMin, shares string // shares "": no shares capacity
		compute, timeSliced        bool
	}{
		{resourceslices.SharesMemory, "80Gi", "1Mi", "", true, false},
		{resourceslices.SharesInteger, "0", "0", "4", false, true},
		{resourceslices.SharesUnlimited, "0", "0", "", false, true},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			o := sharesOn(tc.mode, 1)
			res := resourceslices.Build("n1", inv, o)
			if err := resourceslices.Validate(res); err != nil {
				t.Fatal(err)
			}
			devs := map[string]resourceapi.Device{}
			for _, s := range res.Pools["n1"].Slices {
				for _, d := range s.Devices {
					devs[d.Name] = d
				}
			}
			if d := devs["gpu-0"]; d.AllowMultipleAllocations != nil || d.Capacity["memory"].RequestPolicy != nil {
				t.Errorf("gpu-0 is not chosen but is shareable: %+v", d)
			}
			d := devs["gpu-1"]
			if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations {
				t.Fatal("gpu-1 does not allow multiple allocations")
			}
			if _, ok := d.Capacity["multiprocessors"]; ok {
				t.Error("multiprocessors is a capacity: every share would take all of it")
			}
			mem := d.Capacity["memory"]
			policyOK(t, "memory", mem)
			if p := mem.RequestPolicy; p.Default.String() != tc.memDefault || p.ValidRange.Min.String() != tc.memMin || p.ValidRange.Step.String() != "1Mi" || p.ValidRange.Max.String() != "80Gi" {
				t.Errorf("memory policy: default %s min %s step %s max %s", p.Default.String(), p.ValidRange.Min.String(), p.ValidRange.Step.String(), p.ValidRange.Max.String())
			}
			sh, hasShares := d.Capacity[resourceslices.CapShares]
			if hasShares != (tc.shares != "") {
				t.Fatalf("shares capacity present %v, want %v", hasShares, tc.shares != "")
			}
			if hasShares {
				policyOK(t, "shares", sh)
				if sh.Value.String() != tc.shares || sh.RequestPolicy.Default.String() != "1" {
					t.Errorf("shares %s default %s", sh.Value.String(), sh.RequestPolicy.Default.String())
				}
			}
			if _, ok := d.Capacity["computePercentage"]; ok != tc.compute {
				t.Errorf("computePercentage present %v, want %v", ok, tc.compute)
			}
			if n := len(d.Attributes) + len(d.Capacity); n > resourceslices.MaxAttributesAndCapacities {
				t.Errorf("%d attributes and capacities", n)
			}
			for _, e := range resourceslices.NewTable(inv, o).Entries {
				if e.Device.Name == "gpu-1" && (e.TimeSlicedShares != "") != tc.timeSliced {
					t.Errorf("entry TimeSlicedShares %q", e.TimeSlicedShares)
				}
			}
		})
	}
}

// nvidiaClaims allocates n claims of NVIDIA's spec and returns the devices
// they got ("" for one that did not fit).
func nvidiaClaims(c *schedtest.Cluster, prefix, spec string, n int, t *testing.T) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		r := c.Allocate(schedtest.ClaimFromSpec(t, fmt.Sprintf("%s-%d", prefix, i), spec))
		if r == nil {
			out = append(out, "")
			continue
		}
		if r.Devices.Results[0].ShareID == nil {
			t.Fatalf("%s-%d: allocated without a share ID: %+v", prefix, i, r.Devices.Results[0])
		}
		out = append(out, r.Devices.Results[0].Device)
	}
	return out
}

func all(devs []string, want string) bool {
	for _, d := range devs {
		if d != want {
			return false
		}
	}
	return true
}

// NVIDIA's users' claims, unchanged, share one GPU through the real
// allocator as they do on NVIDIA's driver (its e2e and bats suites check
// that two such pods land on the same GPU).
func TestNVIDIAConsumableShareClaims(t *testing.T) {
	inv := simulatedInventory(t, "h100x2")
	build := func(mode resourceslices.ShareMode) *schedtest.Cluster {
		return schedtest.New(t, driverName, "n1", resourceslices.Build("n1", inv, sharesOn(mode)))
	}
	t.Run("memory", func(t *testing.T) {
		c := build(resourceslices.SharesMemory)
		// 20 shares of 4Gi fill an 80Gi H100; the 21st goes to gpu-1.
		if got := nvidiaClaims(c, "mem", schedtest.NVIDIAMemoryShare, 21, t); !all(got[:20], "gpu-0") || got[20] != "gpu-1" {
			t.Fatalf("4Gi shares on %v", got)
		}
		// A claim without a request takes all of a GPU's memory: not
		// the shared gpu-0, nor gpu-1 where one share is.
		if got := nvidiaClaims(c, "unsized", schedtest.NVIDIAUnsizedShare, 1, t); got[0] != "" {
			t.Fatalf("an unsized claim took a shared GPU in memory mode: %v", got)
		}
		if got := nvidiaClaims(c, "e2e", schedtest.NVIDIAE2EMemoryShare, 2, t); !all(got, "gpu-1") {
			t.Fatalf("2Gi shares on %v", got)
		}
	})
	t.Run("integer", func(t *testing.T) {
		c := build(resourceslices.SharesInteger)
		if got := nvidiaClaims(c, "unsized", schedtest.NVIDIAUnsizedShare, 4, t); !all(got, "gpu-0") {
			t.Fatalf("4 unsized claims on %v", got)
		}
		if got := nvidiaClaims(c, "one", schedtest.NVIDIAIntegerShare, 5, t); !all(got[:4], "gpu-1") || got[4] != "" {
			t.Fatalf("shares: 1 claims on %v (4 per GPU, 8 in all)", got)
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		c := build(resourceslices.SharesUnlimited)
		if got := nvidiaClaims(c, "e2e", schedtest.NVIDIAE2EUnlimitedShare, 100, t); !all(got, "gpu-0") {
			t.Fatalf("100 unlimited claims on %v", got)
		}
		// A memory request is booked (not enforced: time-sliced).
		if got := nvidiaClaims(c, "mem", schedtest.NVIDIAE2EMemoryShare, 41, t); !all(got[:40], "gpu-0") || got[40] != "gpu-1" {
			t.Fatalf("2Gi claims on %v", got)
		}
	})
}

func TestParseShareMode(t *testing.T) {
	for in, want := range map[string]string{
		"": "none/0", "none": "none/0", "disabled": "none/0", "memory": "memory/0",
		"integer": "integer/0", "unlimited": "unlimited/0", "8": "integer/8",
	} {
		m, n, err := resourceslices.ParseShareMode(in)
		if got := fmt.Sprintf("%s/%d", m, n); err != nil || got != want {
			t.Errorf("%q: %s %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "-1", "Memory", "shares"} {
		if _, _, err := resourceslices.ParseShareMode(bad); err == nil || !strings.Contains(err.Error(), "--consumable-shares") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	c := resourceslices.ConsumableShares{Mode: resourceslices.SharesUnlimited, GPUs: []int{1}}
	if c.Overlaps(true, []int{0}) || !c.Overlaps(true, nil) || !c.Overlaps(true, []int{1}) || c.Overlaps(false, nil) {
		t.Error("Overlaps")
	}
}

// A GPU offered for shares and passthrough bounds its shares by the
// counter the vfio device consumes whole: the share count in integer mode.
func TestConsumableSharesWithPassthrough(t *testing.T) {
	inv := simulatedInventory(t, "h100x1")
	o := sharesOn(resourceslices.SharesInteger)
	o.Passthrough = resourceslices.PassthroughSelector{All: true}
	res := resourceslices.Build("n1", inv, o)
	if err := resourceslices.Validate(res); err != nil {
		t.Fatal(err)
	}
	c := schedtest.New(t, driverName, "n1", res)
	vm := schedtest.Claim("vm", schedtest.Request("vm", "vfio.gpu.nvidia.com", 1))
	free := c.Allocate(vm)
	if free == nil {
		t.Fatal("the vfio device of a free GPU was refused")
	}
	c.Deallocate(free)
	if got := nvidiaClaims(c, "one", schedtest.NVIDIAIntegerShare, 5, t); !all(got[:4], "gpu-0") || got[4] != "" {
		t.Fatalf("shares with passthrough on %v", got)
	}
	if r := c.Allocate(vm); r != nil {
		t.Fatalf("the vfio device was allocated under 4 shares: %v", schedtest.Devices(r))
	}
}
