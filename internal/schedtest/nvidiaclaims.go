// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package schedtest

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// The claims NVIDIA's reference driver's users write for its consumable
// shares (--consumable-shares), each the spec of a ResourceClaimTemplate
// as kubernetes-sigs/dra-driver-nvidia-gpu writes it at 95932046, so that
// tests allocate and prepare what those users' manifests ask for.
const (
	// NVIDIAMemoryShare is demo/specs/consumable-shares/memory-sharing.yaml.
	NVIDIAMemoryShare = `devices:
  requests:
  - name: gpu
    exactly:
      deviceClassName: gpu.nvidia.com
      capacity:
        requests:
          memory: 4Gi
`
	// NVIDIAE2EMemoryShare is test/e2e/framework/specs/consumable-shares-memory.yaml.tmpl.
	NVIDIAE2EMemoryShare = `devices:
  requests:
  - name: gpu
    exactly:
      deviceClassName: gpu.nvidia.com
      capacity:
        requests:
          memory: 2Gi
`
	// NVIDIAIntegerShare is tests/bats/specs/gpu-consumable-shares-integer.yaml.
	NVIDIAIntegerShare = `devices:
  requests:
  - name: gpu
    exactly:
      deviceClassName: gpu.nvidia.com
      capacity:
        requests:
          shares: 1
`
	// NVIDIAUnsizedShare is demo/specs/consumable-shares/integer-sharing.yaml
	// and unlimited-sharing.yaml (the same request): no capacity asked.
	NVIDIAUnsizedShare = `devices:
  requests:
  - name: gpu
    exactly:
      deviceClassName: gpu.nvidia.com
`
	// NVIDIAE2EUnlimitedShare is test/e2e/framework/specs/consumable-shares-unlimited.yaml.tmpl.
	NVIDIAE2EUnlimitedShare = `devices:
  requests:
  - name: gpu
    exactly:
      count: 1
      deviceClassName: gpu.nvidia.com
`
)

// ClaimFromSpec is a claim named name with spec (YAML, as in a
// ResourceClaimTemplate's spec.spec), defaulted as the apiserver would.
func ClaimFromSpec(t T, name, spec string) *resourceapi.ResourceClaim {
	t.Helper()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	if err := yaml.UnmarshalStrict([]byte(spec), &c.Spec); err != nil {
		t.Fatalf("claim %s: %v", name, err)
	}
	for i := range c.Spec.Devices.Requests {
		if e := c.Spec.Devices.Requests[i].Exactly; e != nil {
			if e.AllocationMode == "" {
				e.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if e.AllocationMode == resourceapi.DeviceAllocationModeExactCount && e.Count == 0 {
				e.Count = 1
			}
		}
	}
	return c
}
