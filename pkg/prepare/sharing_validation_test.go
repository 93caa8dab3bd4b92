// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"cmp"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

const testDriver, testPool = "gpu.nvidia.com", "n1"

// planState is a node with two 80Gi GPUs that offers time-slicing and MPS;
// plan touches nothing, so no store, CDI writer or sharing backend is needed.
func planState() *State {
	dev := func(name, uuid string) *AllocatableDevice {
		return &AllocatableDevice{Name: name, Kind: configapi.WholeGPU, GPU: &nvdev.GPU{UUID: uuid, MemoryBytes: 80 << 30}}
	}
	return New(Config{
		DriverName: testDriver, PoolName: testPool,
		Devices: map[string]*AllocatableDevice{"gpu-0": dev("gpu-0", "GPU-aaa"), "gpu-1": dev("gpu-1", "GPU-bbb")},
		Sharing: &SharingConfig{NodeName: testPool, Allowed: map[configapi.SharingStrategy]bool{configapi.TimeSlicingStrategy: true, configapi.MpsStrategy: true}},
	})
}

// planClaim allocates devices to request "gpu" of a claim that has that
// request, with opaque configs from the claim.
func planClaim(devices []string, configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "uid-c"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}},
		}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}},
	}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: testDriver, Pool: testPool, Device: d})
	}
	c.Status.Allocation.Devices.Config = configs
	return c
}

// share makes the claim's first result a memory-fraction share consuming
// the given capacity ("" leaves a capacity out).
func share(c *resourceapi.ResourceClaim, memory, compute string) *resourceapi.ResourceClaim {
	r := &c.Status.Allocation.Devices.Results[0]
	id := types.UID("share-1")
	r.ShareID = &id
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{}
	if memory != "" {
		r.ConsumedCapacity[capMemory] = resource.MustParse(memory)
	}
	if compute != "" {
		r.ConsumedCapacity[capCompute] = resource.MustParse(compute)
	}
	return c
}

func wantPlanError(t *testing.T, s *State, c *resourceapi.ResourceClaim, want ...string) {
	t.Helper()
	_, _, err := s.plan(c)
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Fatalf("plan: error %v, want it to contain %q", err, w)
		}
	}
}

// A share whose consumed memory is no usable limit once ran with no limit
// at all: negative, zero and overflowing values became "0", sub-MiB values
// became 0M.
func TestShareConsumedMemoryMustBeALimit(t *testing.T) {
	const field = `device gpu-0: consumedCapacity["memory"]: `
	for memory, want := range map[string]string{
		"-1Gi":  field + "-1Gi must be positive",
		"0":     field + "0 must be positive",
		"10E":   field + "10E is larger than",
		"512Ki": field + "512Ki is below 1Mi",
		"81Gi":  field + "81Gi exceeds the 81920Mi of device gpu-0",
		"":      `device gpu-0: consumedCapacity["memory"]: missing`,
	} {
		t.Run(cmp.Or(memory, "missing"), func(t *testing.T) {
			wantPlanError(t, planState(), share(planClaim([]string{"gpu-0"}), memory, ""), want)
		})
	}
	_, records, err := planState().plan(share(planClaim([]string{"gpu-0"}), "20Gi", "40"))
	if err != nil {
		t.Fatal(err)
	}
	if sh := records[0].Sharing; sh == nil || sh.PinnedMemoryBytes != 20<<30 || sh.ActiveThreadPercentage != 40 {
		t.Fatalf("share of 20Gi and 40%% compute planned as %+v", sh)
	}
}

// A 150% compute share became CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=150.
func TestShareComputePercentageInRange(t *testing.T) {
	const field = `device gpu-0: consumedCapacity["computePercentage"]: `
	for compute, want := range map[string]string{
		"150": field + "150 is outside 0-100",
		"-5":  field + "-5 is outside 0-100",
		"10E": field + "10E is outside 0-100",
	} {
		t.Run(compute, func(t *testing.T) {
			wantPlanError(t, planState(), share(planClaim([]string{"gpu-0"}), "10Gi", compute), want)
		})
	}
	for _, compute := range []string{"0", "100"} {
		if _, _, err := planState().plan(share(planClaim([]string{"gpu-0"}), "10Gi", compute)); err != nil {
			t.Errorf("compute %s: %v", compute, err)
		}
	}
}

func perDeviceConfig(keys ...string) resourceapi.DeviceAllocationConfiguration {
	var limits []string
	for _, k := range keys {
		limits = append(limits, `"`+k+`":"2Gi"`)
	}
	return opaque(resourceapi.AllocationConfigSourceClaim, testDriver, nil,
		`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPerDevicePinnedMemoryLimit":{`+strings.Join(limits, ",")+`}}}}`)
}

// A per-device limit whose key matches no device was silently ignored, so
// that device ran with no limit. A key is good when it matches any device
// the config applies to, not only the one being planned.
func TestPerDeviceLimitKeysMustMatchADevice(t *testing.T) {
	s := planState()
	wantPlanError(t, s, planClaim([]string{"gpu-0", "gpu-1"}, perDeviceConfig("1", "GPU-typo")),
		`devices.config[0] (from claim): GpuConfig: sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["GPU-typo"]: matches no device`,
		`0, 1, GPU-aaa, GPU-bbb`)
	wantPlanError(t, s, planClaim([]string{"gpu-0"}, perDeviceConfig("1")), `defaultPerDevicePinnedMemoryLimit["1"]: matches no device`, "keys are a device's index in the claim or its UUID: 0, GPU-aaa")
	_, records, err := s.plan(planClaim([]string{"gpu-0", "gpu-1"}, perDeviceConfig("1", "GPU-aaa")))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range records {
		if got := r.Sharing.PinnedMemoryBytes; got != 2<<30 {
			t.Errorf("device %d: limit %d, want 2Gi", i, got)
		}
	}
}

// A config naming a request the claim does not have was dropped unchecked.
// DeviceClass configs are exempt: the scheduler fills in their requests.
func TestConfigRequestsMustExist(t *testing.T) {
	s := planState()
	claim := func(requests ...string) *resourceapi.ResourceClaim {
		c := planClaim([]string{"gpu-0"}, opaque(resourceapi.AllocationConfigSourceClaim, testDriver, requests, timeSlice("Long")))
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: "fa", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "big"}, {Name: "small"}}})
		return c
	}
	wantPlanError(t, s, claim("gpu", "gpux"), `devices.config[0].requests[1]: "gpux" is not a request of claim ns/c`, `gpu, fa, fa/big, fa/small`)
	wantPlanError(t, s, claim("fa/medium"), `devices.config[0].requests[0]: "fa/medium" is not a request`)
	for _, ok := range [][]string{{"gpu"}, {"fa"}, {"fa/small", "gpu"}} {
		if _, _, err := s.plan(claim(ok...)); err != nil {
			t.Errorf("requests %v: %v", ok, err)
		}
	}
	fromClass := planClaim([]string{"gpu-0"}, opaque(resourceapi.AllocationConfigSourceClass, testDriver, []string{"not-in-spec"}, timeSlice("Long")))
	if _, _, err := s.plan(fromClass); err != nil {
		t.Errorf("DeviceClass config: %v", err)
	}
}

// A claim with no device of this driver once reached the CDI writer, which
// answered "invalid CDI Spec: invalid spec, no devices".
func TestPlanNeedsADeviceOfThisDriver(t *testing.T) {
	c := planClaim(nil)
	c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "other.example.com", Pool: testPool, Device: "gpu-0"}}
	wantPlanError(t, planState(), c, "claim ns/c has no device allocated by driver gpu.nvidia.com")
	wantPlanError(t, planState(), planClaim(nil), "claim ns/c has no device allocated by driver gpu.nvidia.com")
}
