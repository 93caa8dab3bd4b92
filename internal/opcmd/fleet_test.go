// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// fleetState writes, as `gpudra diagnose --dump` would, the state of one
// idle node of two dynamic-MIG H100s.
func fleetState(t *testing.T) string {
	t.Helper()
	_, inv, err := simulate.Discover("h100x2", "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	s := clusterview.Snapshot{DriverName: "gpu.nvidia.com"}
	for i, sl := range resourceslices.Objects(s.DriverName, "n1", resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})) {
		sl.Name = fmt.Sprintf("%s%d", sl.GenerateName, i)
		s.Slices = append(s.Slices, sl)
	}
	for _, dc := range schedtest.ShippedDeviceClasses(t) {
		s.DeviceClasses = append(s.DeviceClasses, *dc)
	}
	data, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runFleet(cmd *cobra.Command, args ...string) (string, error) {
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestUsageAndCapacityCommands(t *testing.T) {
	state := fleetState(t)
	out, err := runFleet(NewUsageCommand("gpudra"), "--from", state)
	if err != nil || !strings.Contains(out, "\nn1    0    NVIDIA H100 80GB HBM3  80Gi    ok      free\n") || !strings.Contains(out, "\nn1    1    ") {
		t.Errorf("usage: %v\n%s", err, out)
	}
	out, err = runFleet(NewCapacityCommand("gpudra"), "--from", state, "--mig-profile", "1g.10gb")
	if err != nil || !strings.Contains(out, "n1    14\n") || !strings.Contains(out, "TOTAL: 14 more") {
		t.Errorf("capacity: %v\n%s", err, out)
	}
	out, err = runFleet(NewCapacityCommand("gpudra"), "--from", state, "--mig-profile", "1g.10gb", "-o", "json")
	if err != nil || !strings.Contains(out, `"total": 14`) {
		t.Errorf("capacity -o json: %v\n%s", err, out)
	}
	if _, err := runFleet(NewCapacityCommand("gpudra"), "--from", state, "--mig-profile", "2g.5gb"); err == nil || !strings.Contains(err.Error(), "--mig-profile 2g.5gb") {
		t.Errorf("unknown profile: %v", err)
	}
	if _, err := runFleet(NewUsageCommand("gpudra"), "--from", state, "-o", "name"); err == nil || !strings.Contains(err.Error(), `--output "name": use wide, json or yaml`) {
		t.Errorf("-o name: %v", err)
	}
}

// TestPrintedOutputs: -o json and -o yaml (cli-runtime's printers) write
// the same report as the report's own JSON, the table stays the default.
func TestPrintedOutputs(t *testing.T) {
	state := fleetState(t)
	for _, tc := range []struct {
		name string
		cmd  func(string) *cobra.Command
		args []string
		want func(m map[string]any) bool
	}{
		{"usage", NewUsageCommand, nil, func(m map[string]any) bool {
			gpus, _ := m["gpus"].([]any)
			total, _ := m["total"].(map[string]any)
			return len(gpus) == 2 && total["free"] == 2.0
		}},
		{"capacity", NewCapacityCommand, []string{"--mig-profile", "1g.10gb"}, func(m map[string]any) bool {
			req, _ := m["request"].(map[string]any)
			return m["total"] == 14.0 && req["migProfile"] == "1g.10gb"
		}},
	} {
		for _, format := range []string{"json", "yaml"} {
			out, err := runFleet(tc.cmd("gpudra"), append([]string{"--from", state, "-o", format}, tc.args...)...)
			var m map[string]any
			if err == nil {
				err = yaml.Unmarshal([]byte(out), &m) // JSON is YAML
			}
			if err != nil || !tc.want(m) {
				t.Errorf("%s -o %s: %v\n%s", tc.name, format, err, out)
			}
			if isJSON := strings.HasPrefix(out, "{\n    \""); isJSON != (format == "json") {
				t.Errorf("%s -o %s is not written as kubectl writes it:\n%s", tc.name, format, out)
			}
		}
		if out, err := runFleet(tc.cmd("gpudra"), append([]string{"--from", state}, tc.args...)...); err != nil || !strings.HasPrefix(out, "NODE") {
			t.Errorf("%s: the default is no longer the table: %v\n%s", tc.name, err, out)
		}
	}
}

// TestDisplayName: kubectl runs kubectl-gpu for `kubectl gpu`; help must
// say so.
func TestDisplayName(t *testing.T) {
	for argv0, want := range map[string]string{"/usr/local/bin/kubectl-gpu": "kubectl gpu", "bin/gpudra": "gpudra", "kubectl-gpu.exe": "kubectl gpu"} {
		if got := DisplayName(argv0); got != want {
			t.Errorf("DisplayName(%q) = %q, want %q", argv0, got, want)
		}
	}
}
