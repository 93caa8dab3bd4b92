// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

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
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/diagnose"
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
	s := diagnose.Snapshot{DriverName: "gpu.nvidia.com"}
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
	out, err := runFleet(newUsageCommand(), "--from", state)
	if err != nil || !strings.Contains(out, "\nn1    0    NVIDIA H100 80GB HBM3  80Gi    ok      free\n") || !strings.Contains(out, "\nn1    1    ") {
		t.Errorf("usage: %v\n%s", err, out)
	}
	out, err = runFleet(newCapacityCommand(), "--from", state, "--mig-profile", "1g.10gb")
	if err != nil || !strings.Contains(out, "n1    14\n") || !strings.Contains(out, "TOTAL: 14 more") {
		t.Errorf("capacity: %v\n%s", err, out)
	}
	out, err = runFleet(newCapacityCommand(), "--from", state, "--mig-profile", "1g.10gb", "-o", "json")
	if err != nil || !strings.Contains(out, `"total": 14`) {
		t.Errorf("capacity -o json: %v\n%s", err, out)
	}
	if _, err := runFleet(newCapacityCommand(), "--from", state, "--mig-profile", "2g.5gb"); err == nil || !strings.Contains(err.Error(), "--mig-profile 2g.5gb") {
		t.Errorf("unknown profile: %v", err)
	}
	if _, err := runFleet(newUsageCommand(), "--from", state, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("-o yaml: %v", err)
	}
}

// TestDisplayName: kubectl runs kubectl-gpu for `kubectl gpu`; help must
// say so.
func TestDisplayName(t *testing.T) {
	for argv0, want := range map[string]string{"/usr/local/bin/kubectl-gpu": "kubectl gpu", "bin/gpudra": "gpudra", "kubectl-gpu.exe": "kubectl gpu"} {
		if got := displayName(argv0); got != want {
			t.Errorf("displayName(%q) = %q, want %q", argv0, got, want)
		}
	}
}
