// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Consumable shares are NVIDIA's reference driver's --consumable-shares
// (kubernetes-sigs/dra-driver-nvidia-gpu 95932046,
// cmd/gpu-kubelet-plugin/consumable_shares.go and main.go; its demo in
// demo/specs/consumable-shares): a GPU of gpu.nvidia.com itself allows many
// allocations, and the capacities' request policies say what each claim
// takes of it. The devices are published here with NVIDIA's capacity
// names, steps and defaults, so that claims written for its driver
// allocate the same way; what prepare enforces differs (docs/sharing.md,
// "Consumable shares"): memory shares run under MPS with their memory as
// the limit, integer and unlimited shares are time-sliced.

// ShareMode is how consumable shares offer a GPU.
type ShareMode string

const (
	// SharesNone offers no consumable shares.
	SharesNone ShareMode = "none"
	// SharesMemory: claims take memory (capacity "memory", default all of
	// it, 1Mi steps); a claim that asks for none takes the GPU whole.
	SharesMemory ShareMode = "memory"
	// SharesInteger: claims take "shares" (default 1 of Count); memory
	// may be requested too (default 0) and is only booked.
	SharesInteger ShareMode = "integer"
	// SharesUnlimited: claims need ask for nothing (memory default 0), so
	// any number of them land on one GPU.
	SharesUnlimited ShareMode = "unlimited"
)

// CapShares is the capacity NVIDIA's integer mode adds.
const CapShares = "shares"

// DefaultShareCount is the shares per GPU in integer mode when none is
// given. NVIDIA's flag takes the count as its value and has no default;
// 4 is what its demo (integer-sharing.yaml) and its own tests
// (tests/bats/test_gpu_consumable_shares.bats) run with.
const DefaultShareCount = 4

// shareStep is NVIDIA's memory step: MPS counts whole MiB as well.
var shareStep = resource.MustParse("1Mi")

// ConsumableShares selects the GPUs offered for consumable shares and how.
type ConsumableShares struct {
	Mode ShareMode
	// GPUs are minor numbers; every GPU when empty.
	GPUs []int
	// Count is the shares per GPU in SharesInteger.
	Count int
}

// Enabled reports whether any GPU is offered for consumable shares.
func (c ConsumableShares) Enabled() bool { return c.Mode != "" && c.Mode != SharesNone }

func (c ConsumableShares) selects(g *nvdev.GPU) bool {
	return c.Enabled() && (len(c.GPUs) == 0 || slices.Contains(c.GPUs, g.Minor))
}

// TimeSliced reports whether shares in mode m are time-sliced: integer and
// unlimited shares have no memory size of their own to enforce (their
// memory is 0 unless asked for), so they take turns on the whole GPU.
func (m ShareMode) TimeSliced() bool { return m == SharesInteger || m == SharesUnlimited }

// ParseShareMode reads --consumable-shares: none, memory, integer or
// unlimited, or NVIDIA's spellings ("disabled", a positive share count
// meaning integer mode with that count). count is the share count an
// integer value sets (0 otherwise).
func ParseShareMode(s string) (mode ShareMode, count int, err error) {
	switch v := strings.TrimSpace(s); v {
	case "", "none", "disabled":
		return SharesNone, 0, nil
	case string(SharesMemory), string(SharesInteger), string(SharesUnlimited):
		return ShareMode(v), 0, nil
	default:
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return SharesInteger, n, nil
		}
		return "", 0, fmt.Errorf("--consumable-shares: %q is not a mode; use none, memory, integer or unlimited (or, as NVIDIA's driver takes it, a positive share count)", s)
	}
}

// Overlaps reports whether memory fractions (FractionalMemory on gpus, all
// when empty) and consumable shares offer a GPU both ways: a GPU is
// published one way only, so start refuses the combination rather than
// pick one silently.
func (c ConsumableShares) Overlaps(fractional bool, gpus []int) bool {
	if !fractional || !c.Enabled() {
		return false
	}
	if len(gpus) == 0 || len(c.GPUs) == 0 {
		return true
	}
	return slices.ContainsFunc(c.GPUs, func(m int) bool { return slices.Contains(gpus, m) })
}

// ConsumableShareDevice publishes g for consumable shares in c's mode:
// allowMultipleAllocations, memory with NVIDIA's request policy (1Mi steps,
// the value rounded down to them so that the policy's bounds are whole
// steps, as the API requires), and per mode: computePercentage (memory
// mode: MPS enforces it too, as for memory fractions; an addition of
// this driver) or "shares" (integer mode, default 1 of Count).
func ConsumableShareDevice(inv *nvdev.Inventory, g *nvdev.GPU, c ConsumableShares) resourceapi.Device {
	d := gpuDevice(inv, g)
	d.AllowMultipleAllocations = ptr.To(true)
	// Every capacity without a request policy is taken whole by each
	// share, so the SM count is an attribute here (as ShareableGPUDevice).
	if sms, ok := d.Capacity[deviceattr.CapMultiprocessors]; ok {
		delete(d.Capacity, deviceattr.CapMultiprocessors)
		d.Attributes[deviceattr.CapMultiprocessors] = resourceapi.DeviceAttribute{IntValue: ptr.To(sms.Value.Value())}
	}
	total := resource.NewQuantity(int64(g.MemoryBytes)/shareStep.Value()*shareStep.Value(), resource.BinarySI)
	zero := resource.NewQuantity(0, resource.BinarySI)
	policy := &resourceapi.CapacityRequestPolicy{
		Default:    zero,
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: zero, Max: total, Step: ptr.To(shareStep)},
	}
	if c.Mode == SharesMemory {
		policy.Default = total
		policy.ValidRange.Min = ptr.To(shareStep)
		d.Capacity[deviceattr.CapComputePercentage] = computeCapacity()
	}
	d.Capacity[deviceattr.CapMemory] = resourceapi.DeviceCapacity{Value: *total, RequestPolicy: policy}
	if c.Mode == SharesInteger {
		n := resource.NewQuantity(int64(shareCount(c)), resource.DecimalSI)
		one := resource.NewQuantity(1, resource.DecimalSI)
		d.Capacity[CapShares] = resourceapi.DeviceCapacity{
			Value: *n,
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default:    one,
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: one, Max: n, Step: one},
			},
		}
	}
	return d
}

func shareCount(c ConsumableShares) int {
	if c.Count > 0 {
		return c.Count
	}
	return DefaultShareCount
}

// computeCapacity is computePercentage as memory shares offer it: 0-100
// in 1-point steps, default 0 (no compute limit).
func computeCapacity() resourceapi.DeviceCapacity {
	zero, hundred := resource.NewQuantity(0, resource.DecimalSI), resource.NewQuantity(100, resource.DecimalSI)
	return resourceapi.DeviceCapacity{
		Value: *hundred,
		RequestPolicy: &resourceapi.CapacityRequestPolicy{
			Default:    zero,
			ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: zero, Max: hundred, Step: resource.NewQuantity(1, resource.DecimalSI)},
		},
	}
}

// shareableEntry is the table entry of a GPU published Shareable: for
// consumable shares when o selects it for them, else for memory fractions
// (also a GPU whose held shares keep it shareable after both were turned
// off: the claims still there keep their device).
func shareableEntry(inv *nvdev.Inventory, g *nvdev.GPU, o Options) Entry {
	c := o.ConsumableShares
	if !c.selects(g) {
		return Entry{Device: ShareableGPUDevice(inv, g), Kind: configapi.WholeGPU, GPU: g}
	}
	e := Entry{Device: ConsumableShareDevice(inv, g, c), Kind: configapi.WholeGPU, GPU: g}
	if c.Mode.TimeSliced() {
		e.TimeSlicedShares = string(c.Mode)
	}
	return e
}

// passthroughShares is the "gpu" counter of a shareable GPU also offered
// for passthrough (gpuCounterSet), each share consuming 1: Count in
// integer mode; otherwise one share per GiB, which also bounds unlimited
// shares there (the vfio device must be able to consume all of them).
func passthroughShares(g *nvdev.GPU, o Options) int64 {
	if c := o.ConsumableShares; c.selects(g) && c.Mode == SharesInteger {
		return int64(shareCount(c))
	}
	return max(1, int64(g.MemoryBytes>>gibibyteBits))
}
