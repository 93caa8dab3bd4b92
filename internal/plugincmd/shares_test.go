// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"bytes"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

// --consumable-shares takes this driver's modes and NVIDIA's spellings of
// them, and --print-slices shows the GPU as the mode publishes it.
func TestConsumableSharesFlag(t *testing.T) {
	for args, want := range map[string]string{
		"--consumable-shares=memory":                               "memory:1Mi/computePercentage",
		"--consumable-shares=integer":                              "memory:0/shares:4",
		"--consumable-shares=integer --consumable-shares-count=10": "memory:0/shares:10",
		"--consumable-shares=6":                                    "memory:0/shares:6",
		"--consumable-shares=unlimited":                            "memory:0",
		"--consumable-shares=unlimited --consumable-shares-gpus=3": "whole",
		"--consumable-shares=disabled":                             "whole",
		"--consumable-shares=unlimited --fractional-memory-gpus=0": "memory:0",
		"--consumable-shares=memory --consumable-shares-gpus=0,1":  "memory:1Mi/computePercentage",
	} {
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"--simulate", "h100x1", "--node-name", "n1", "--print-slices"}, strings.Fields(args)...))
		if err := cmd.Execute(); err != nil {
			t.Errorf("%s: %v", args, err)
			continue
		}
		d := printedDevice(t, out.String(), "gpu-0")
		got := "whole"
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			got = "memory:" + d.Capacity["memory"].RequestPolicy.ValidRange.Min.String()
			if sh, ok := d.Capacity["shares"]; ok {
				got += "/shares:" + sh.Value.String()
			}
			if _, ok := d.Capacity["computePercentage"]; ok {
				got += "/computePercentage"
			}
		}
		if got != want {
			t.Errorf("%s: gpu-0 published %s, want %s", args, got, want)
		}
	}
}

func TestConsumableSharesBadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--consumable-shares=0":                                   "--consumable-shares: \"0\" is not a mode",
		"--consumable-shares=fraction":                            "use none, memory, integer or unlimited",
		"--consumable-shares=integer --consumable-shares-count=0": "--consumable-shares-count: 0",
		"--consumable-shares=6 --consumable-shares-count=8":       "disagree",
		"--consumable-shares=memory --fractional-memory":          "sharing.consumableShares.gpus and sharing.fractionalMemoryGPUs",
		"--consumable-shares=unlimited --consumable-shares-gpus=0 --fractional-memory --fractional-memory-gpus=0,1": "both offer the same GPUs ([0] and [0 1])",
	} {
		cmd := newCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"--simulate", "h100x1", "--node-name", "n1", "--print-slices"}, strings.Fields(args)...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", args, err, want)
		}
	}
}

// printedDevice is the device named name in --print-slices output.
func printedDevice(t *testing.T, out, name string) resourceapi.Device {
	t.Helper()
	for _, doc := range strings.Split(out, "---\n") {
		var s resourceapi.ResourceSlice
		if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("no device %s in:\n%s", name, out)
	return resourceapi.Device{}
}
