// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	gslices "slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// fixture is a recorded cluster state (as `gpudra diagnose --dump` writes
// it) and the diagnosis it must get. A node's ResourceSlices are not
// recorded, which would be thousands of lines for eight H100s with MIG, but
// rebuilt by pkg/resourceslices from the simulator, exactly as the plugin
// publishes them.
type fixture struct {
	Description string               `json:"description"`
	Target      clusterview.Target   `json:"target"`
	Simulated   []simulatedNode      `json:"simulated,omitempty"`
	Snapshot    clusterview.Snapshot `json:"snapshot"`
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
	data, err := os.ReadFile(path)
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

func diagnoseTarget(s *clusterview.Snapshot, t clusterview.Target) *Report {
	switch t.Kind {
	case "pod":
		return DiagnosePod(s, t.Namespace, t.Name)
	case "claim":
		return DiagnoseClaim(s, t.Namespace, t.Name)
	}
	return DiagnoseNode(s, t.Name)
}

// TestFixtures runs every recorded state in testdata and checks its
// verdict, exit code and the evidence both output formats render; the
// whole JSON report must equal testdata/<fixture>.json (-update rewrites
// those).
func TestFixtures(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			f := loadFixture(t, path)
			r := diagnoseTarget(&f.Snapshot, f.Target)
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s\n%s", f.Description, text.String())
			if r.Status != f.Want.Status {
				t.Errorf("status %s, want %s; verdict: %s", r.Status, f.Want.Status, r.Verdict)
			}
			want := map[Status]int{OK: 0, Blocked: 1, Unknown: 2}[f.Want.Status]
			if r.ExitCode() != want {
				t.Errorf("exit code %d, want %d", r.ExitCode(), want)
			}
			for _, s := range f.Want.Verdict {
				if !strings.Contains(r.Verdict, s) {
					t.Errorf("verdict lacks %q:\n%s", s, r.Verdict)
				}
			}
			if f.Want.FailedStep != "" && (r.Prepare == nil || r.Prepare.Step != f.Want.FailedStep) {
				t.Errorf("failed step %+v, want %s", r.Prepare, f.Want.FailedStep)
			}
			if !strings.HasPrefix(text.String(), strings.ToUpper(string(r.Status))+": "+r.Target+"\n"+r.Verdict+"\n") {
				t.Errorf("text output does not start with the verdict:\n%s", text.String())
			}
			var js bytes.Buffer
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Verdict != r.Verdict || back.Status != r.Status {
				t.Errorf("JSON output does not round-trip: %v", err)
			}
			checkGolden(t, strings.TrimSuffix(path, ".yaml")+".json", js.Bytes())
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden JSON reports in testdata (go test ./pkg/diagnose -run TestFixtures -update)")

// checkGolden compares a fixture's whole report, the evidence as well as
// the verdict, with the JSON output recorded next to it.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("report differs from %s at line %d (run with -update after checking the change):\n got: %s\nwant: %s", path, i+1, g, w)
				return
			}
		}
	}
}
