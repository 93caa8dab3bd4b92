// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"os"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// prepareFails prepares a claim over the kubelet socket, expects an error
// containing each of want, and checks that nothing was written for it.
func (n *node) prepareFails(c *resourceapi.ResourceClaim, want ...string) {
	n.t.Helper()
	r := n.prepare(c)[string(c.UID)]
	if r == nil {
		n.t.Fatalf("no response for %s", c.Name)
	}
	for _, w := range want {
		if !strings.Contains(r.Error, w) {
			n.t.Fatalf("prepare %s: error %q, want it to contain %q", c.Name, r.Error, w)
		}
	}
	if files := n.checkpointFiles(); len(files) > 0 {
		n.t.Fatalf("a failed prepare left records: %v", files)
	}
}

// A claim with no device of this driver got "invalid CDI Spec: invalid
// spec, no devices" from the CDI writer, after a record was written.
func TestPrepareClaimWithoutDeviceOfThisDriver(t *testing.T) {
	n := newNode(t, "h100x1")
	c := n.claim("empty", nil)
	n.prepareFails(c, "claim default/empty has no device allocated by driver "+testDriver)
	if _, err := os.Stat(n.specPath(c)); !os.IsNotExist(err) {
		t.Fatalf("CDI spec of a claim without devices: %v", err)
	}
}

// Limits that once meant no limit at all are refused with the field named,
// before anything is written.
func TestPrepareRefusesNoLimitByAccident(t *testing.T) {
	n := newNode(t, "h100x2")
	mps := func(m string) string {
		return `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":` + m + `}}`
	}
	huge := n.claim("huge", []string{"gpu-0"}, mps(`{"defaultPinnedDeviceMemoryLimit":"10E"}`))
	n.prepareFails(huge, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: 10E is larger than")
	tiny := n.claim("tiny", []string{"gpu-0"}, mps(`{"defaultPinnedDeviceMemoryLimit":"512Ki"}`))
	n.prepareFails(tiny, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: 512Ki is below 1Mi")
	typo := n.claim("typo", []string{"gpu-0", "gpu-1"}, mps(`{"defaultPerDevicePinnedMemoryLimit":{"1":"2Gi","GPU-typo":"2Gi"}}`))
	n.prepareFails(typo, `defaultPerDevicePinnedMemoryLimit["GPU-typo"]: matches no device`, "0, 1, GPU-")
	word := n.claim("word", []string{"gpu-0"}, mps(`{"defaultPinnedDeviceMemoryLimit":"lots"}`))
	n.prepareFails(word, `sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: invalid quantity "lots": use a Kubernetes quantity such as 10Gi`)
	share := n.sharedClaim("share", "gpu-0", "20Gi", "150")
	n.prepareFails(share, `consumedCapacity["computePercentage"]: 150 is outside 0-100`)
}
