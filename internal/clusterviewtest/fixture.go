// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clusterviewtest loads the recorded cluster states in
// pkg/diagnose/testdata for the tests of pkg/diagnose (whose verdicts and
// golden reports they are) and of pkg/clusterview (which reads a few of
// them): one loader, so the two packages cannot read a state differently.
// It is a package of its own because a test file cannot be imported;
// pkg/clusterview's tests that use it are therefore in clusterview_test.
package clusterviewtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// Fixture is a recorded cluster state (as `gpudra diagnose --dump` writes
// it) and the diagnosis it must get. A node's ResourceSlices are not
// recorded, which would be thousands of lines for eight H100s with MIG, but
// rebuilt by pkg/resourceslices from the simulator, exactly as the plugin
// publishes them.
type Fixture struct {
	Description string               `json:"description"`
	Target      clusterview.Target   `json:"target"`
	Simulated   []SimulatedNode      `json:"simulated,omitempty"`
	Snapshot    clusterview.Snapshot `json:"snapshot"`
	Want        struct {
		Status     clusterview.Status `json:"status"`
		Verdict    []string           `json:"verdict"`
		FailedStep string             `json:"failedStep,omitempty"`
	} `json:"want"`
}

// SimulatedNode is a node whose slices the fixture rebuilds.
type SimulatedNode struct {
	Node           string `json:"node"`
	Profile        string `json:"profile"`
	DynamicMIG     bool   `json:"dynamicMIG,omitempty"`
	FractionalGPUs []int  `json:"fractionalGPUs,omitempty"`
	// DropSlices leaves slices out, as while the plugin is still writing
	// them: an incomplete pool.
	DropSlices []int `json:"dropSlices,omitempty"`
	// Taints are added to devices by name.
	Taints map[string]resourceapi.DeviceTaint `json:"taints,omitempty"`
}

// Load reads the fixture at path (relative to the calling test's
// package). A snapshot without a driver name is the driver's, one without
// DeviceClasses has the chart's; the simulated nodes' slices are added.
func Load(t testing.TB, path string) *Fixture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fixture{}
	if err := yaml.UnmarshalStrict(data, f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if f.Snapshot.DriverName == "" {
		f.Snapshot.DriverName = "gpu.nvidia.com"
	}
	if f.Snapshot.DeviceClasses == nil {
		for _, dc := range schedtest.ShippedDeviceClasses(t) {
			f.Snapshot.DeviceClasses = append(f.Snapshot.DeviceClasses, *dc)
		}
	}
	f.BuildSlices(t)
	return f
}

// BuildSlices adds the slices of the simulated nodes, as the plugin
// publishes them.
func (f *Fixture) BuildSlices(t testing.TB) {
	t.Helper()
	for _, n := range f.Simulated {
		_, inv, err := simulate.Discover(n.Profile, n.Node, filepath.Join(t.TempDir(), "sim"))
		if err != nil {
			t.Fatal(err)
		}
		res := resourceslices.Build(n.Node, inv, resourceslices.Options{DynamicMIG: n.DynamicMIG, FractionalMemory: len(n.FractionalGPUs) > 0, FractionalGPUs: n.FractionalGPUs})
		for i, s := range resourceslices.Objects(f.Snapshot.DriverName, n.Node, res) {
			if slices.Contains(n.DropSlices, i) {
				continue
			}
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, i)
			for j := range s.Spec.Devices {
				if taint, ok := n.Taints[s.Spec.Devices[j].Name]; ok {
					s.Spec.Devices[j].Taints = append(s.Spec.Devices[j].Taints, taint)
				}
			}
			f.Snapshot.Slices = append(f.Snapshot.Slices, s)
		}
	}
}

// AdminAccessCounters is the recorded state of a monitoring pod whose
// admin-access claim monitoring/all-gpus waits on a busy dynamic-MIG node
// (kubernetes/kubernetes#140729); both packages' admin-access tests start
// from it (a name in pkg/diagnose/testdata).
const AdminAccessCounters = "pending-admin-access-counters.yaml"

// SetAdminRequest changes the class and admin access of the request of
// AdminAccessCounters' claim monitoring/all-gpus.
func (f *Fixture) SetAdminRequest(t testing.TB, class string, admin bool) {
	t.Helper()
	claim := f.Snapshot.Claim("monitoring", "all-gpus")
	if claim == nil {
		t.Fatal("fixture lacks claim monitoring/all-gpus")
	}
	req := claim.Spec.Devices.Requests[0].Exactly
	req.DeviceClassName = class
	req.AdminAccess = ptr.To(admin)
}
