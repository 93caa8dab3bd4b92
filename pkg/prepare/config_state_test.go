// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

func migTimeSlice(interval string) string {
	return `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"` + interval + `"}}}`
}

// TestConfigsApplyPerRequest: a DeviceClass config applies to every
// request, a claim config scoped to one request overrides it for that
// request only, and unprepare puts the GPUs' time slices back.
func TestConfigsApplyPerRequest(t *testing.T) {
	n := newNode(t, "h100x3", false)
	class, fromClaim := resourceapi.AllocationConfigSourceClass, resourceapi.AllocationConfigSourceClaim
	c := claim("uid-1", result{request: "infer", device: "gpu-0"}, result{request: "train", device: "gpu-1"}, result{request: "batch", device: "gpu-2"})
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaque(fromClaim, testDriver, []string{"train"}, timeSlice("Short")),
		opaque(class, testDriver, nil, timeSlice("Long")),
		opaque(fromClaim, testDriver, []string{"batch"}, timeSlice("Medium")),
		opaque(fromClaim, "other.example.com", []string{"no-such-request"}, `not even JSON`),
	}
	n.prepare(c)
	for minor, want := range []string{"Long", "Short", "Medium"} {
		if got := n.sim.TimeSlice(n.uuid(minor)); got != want {
			t.Errorf("GPU %d: time slice %s, want %s", minor, got, want)
		}
	}
	rec, _ := n.store.Get("uid-1")
	if sh := rec.Devices[1].Sharing; sh == nil || sh.Interval != "Short" || sh.Target != n.uuid(1) {
		t.Errorf("record of the train device: %+v", sh)
	}
	n.unprepare(c)
	for minor := range 3 {
		if got := n.sim.TimeSlice(n.uuid(minor)); got != string(configapi.DefaultTimeSlice) {
			t.Errorf("GPU %d: time slice %s after unprepare, want Default", minor, got)
		}
	}
}

// TestConfigErrorsNameTheField: a bad config fails the prepare before any
// device is touched, and the error says which config and field to fix.
func TestConfigErrorsNameTheField(t *testing.T) {
	n := newNode(t, "h100x2", true)
	mig := n.mig(1, "1g.10gb", 0)
	fromClaim := resourceapi.AllocationConfigSourceClaim
	for name, tc := range map[string]struct {
		configs []resourceapi.DeviceAllocationConfiguration
		want    []string
	}{
		"unknown interval": {
			[]resourceapi.DeviceAllocationConfiguration{opaque(fromClaim, testDriver, []string{"gpu"}, migTimeSlice("Forever"))},
			[]string{"devices.config[0] (from claim)", `interval: unknown interval "Forever"`},
		},
		"unknown request": {
			[]resourceapi.DeviceAllocationConfiguration{opaque(fromClaim, testDriver, []string{"gpus"}, timeSlice("Short"))},
			[]string{`devices.config[0].requests[0]: "gpus" is not a request of claim ns/claim-uid-bad`, "its requests are gpu"},
		},
		"GpuConfig on a MIG device": {
			[]resourceapi.DeviceAllocationConfiguration{opaque(fromClaim, testDriver, nil, timeSlice("Short"))},
			[]string{"devices.config[0] (from claim)", `for request "gpu"`, "use kind MigDeviceConfig"},
		},
		"undecodable config": {
			[]resourceapi.DeviceAllocationConfiguration{
				opaque(fromClaim, testDriver, nil, migTimeSlice("Short")),
				opaque(resourceapi.AllocationConfigSourceClass, testDriver, nil, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}},"tiemSlice":1}`),
			},
			[]string{"devices.config[1] (from DeviceClass)", "tiemSlice"},
		},
		"strategy the node does not offer": {
			[]resourceapi.DeviceAllocationConfiguration{opaque(fromClaim, testDriver, nil,
				`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS"}}`)},
			[]string{"sharing.strategy: MPS is not enabled on node " + testPool, "--sharing-strategies"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := claim("uid-bad", dev(mig))
			c.Status.Allocation.Devices.Config = tc.configs
			_, err := n.tryPrepare(c)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v, want it to contain %q", err, w)
				}
			}
			n.assertGone("uid-bad")
			if n.sim.MigInstanceCount(n.uuid(1)) != 0 {
				t.Fatal("a claim with a bad config created a MIG device")
			}
		})
	}
	// The MIG kind applies to the MIG device; time-slicing there takes only
	// Default and leaves the parent GPU's time slice alone.
	c := claim("uid-good", dev(mig))
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(fromClaim, testDriver, nil, migTimeSlice("Default"))}
	n.prepare(c)
	if got := n.sim.TimeSlice(n.uuid(1)); got != "Default" {
		t.Fatalf("time slice of the MIG device's GPU: %s, want Default", got)
	}
}

// TestAllocationMustMatchTheNode: a result from another pool, a device the
// node no longer publishes, or an unallocated claim is refused with the
// reason.
func TestAllocationMustMatchTheNode(t *testing.T) {
	n := newNode(t, "h100x1", false)
	otherPool := claim("uid-1", dev("gpu-0"))
	otherPool.Status.Allocation.Devices.Results[0].Pool = "n2"
	unallocated := claim("uid-3", dev("gpu-0"))
	unallocated.Status.Allocation = nil
	for c, want := range map[*resourceapi.ResourceClaim]string{
		otherPool:                    `device gpu-0 is in pool "n2", this node serves pool "` + testPool + `"`,
		claim("uid-2", dev("gpu-7")): "device gpu-7 is not published by this node",
		unallocated:                  "claim ns/claim-uid-3 is not allocated",
	} {
		if _, err := n.tryPrepare(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("claim %s: error %v, want %q", c.UID, err, want)
		}
		n.assertGone(c.UID)
	}
}
