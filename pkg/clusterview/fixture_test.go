// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"os"
	"path/filepath"
	gslices "slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// fixture is a recorded cluster state (as `gpudra diagnose --dump` writes
// it) and the diagnosis it must get. A node's ResourceSlices are not
// recorded, which would be thousands of lines for eight H100s with MIG, but
// rebuilt by pkg/resourceslices from the simulator, exactly as the plugin
// publishes them.
//
// The recorded states are pkg/diagnose's (its testdata, whose verdicts and
// golden reports TestFixtures checks there): loadFixture reads the few the
// tests here need from there, so that each state is recorded once. This
// loader is pkg/diagnose's own (diagnose_test.go), repeated: a test file
// cannot be imported.
type fixture struct {
	Description string          `json:"description"`
	Target      Target          `json:"target"`
	Simulated   []simulatedNode `json:"simulated,omitempty"`
	Snapshot    Snapshot        `json:"snapshot"`
	Want        struct {
		Status     Status   `json:"status"`
		Verdict    []string `json:"verdict"`
		FailedStep string   `json:"failedStep,omitempty"`
	} `json:"want"`
}

type simulatedNode struct {
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

func loadFixture(t testing.TB, path string) *fixture {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "diagnose", path))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
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
	f.buildSlices(t)
	return f
}

// buildSlices adds the slices of the simulated nodes, as the plugin
// publishes them.
func (f *fixture) buildSlices(t testing.TB) {
	t.Helper()
	for _, n := range f.Simulated {
		_, inv, err := simulate.Discover(n.Profile, n.Node, filepath.Join(t.TempDir(), "sim"))
		if err != nil {
			t.Fatal(err)
		}
		res := resourceslices.Build(n.Node, inv, resourceslices.Options{DynamicMIG: n.DynamicMIG, FractionalMemory: len(n.FractionalGPUs) > 0, FractionalGPUs: n.FractionalGPUs})
		for i, s := range resourceslices.Objects(f.Snapshot.DriverName, n.Node, res) {
			if gslices.Contains(n.DropSlices, i) {
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
