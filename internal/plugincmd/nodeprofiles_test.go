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

// TestNodeProfile: a node named in the list gets its entry, another node
// the default; malformed lists fail on every node, naming the flag.
func TestNodeProfile(t *testing.T) {
	list := []string{"gpu-a=h100x8", " gpu-b=a100-80gbx4:mig ", ""}
	for node, want := range map[string]string{"gpu-a": "h100x8", "gpu-b": "a100-80gbx4:mig", "gpu-c": "h200x8"} {
		got, err := nodeProfile(list, node, "h200x8")
		if err != nil || got != want {
			t.Errorf("node %s: got %q, %v; want %q", node, got, err, want)
		}
	}
	if got, err := nodeProfile(nil, "n", ""); err != nil || got != "" {
		t.Errorf("no list, no default: got %q, %v", got, err)
	}
	for _, bad := range [][]string{{"gpu-a"}, {"=h100x8"}, {"gpu-a="}, {"gpu-a=h100x8", "gpu-a=h200x8"}, {"other=h100"}, {"other=z100x8"}} {
		_, err := nodeProfile(bad, "gpu-a", "h100x8")
		if err == nil || !strings.Contains(err.Error(), "--simulate-node-profiles") {
			t.Errorf("%q: error %v, want one naming --simulate-node-profiles", bad, err)
		}
	}
}

// TestPrintSlicesNodeProfile: the plugin on a listed node publishes that
// node's model, and the flag's environment variable works the same.
func TestPrintSlicesNodeProfile(t *testing.T) {
	products := func(args ...string) map[string]int {
		t.Helper()
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"--simulate", "h100x2", "--print-slices", "--monitor-devices=false"}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, doc := range strings.Split(out.String(), "---\n") {
			var s resourceapi.ResourceSlice
			if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
				t.Fatal(err)
			}
			for _, d := range s.Spec.Devices {
				if a, ok := d.Attributes["type"]; ok && *a.StringValue == "gpu" {
					got[*d.Attributes["productName"].StringValue]++
				}
			}
		}
		return got
	}
	const list = "gpu-a=a100-80gbx4"
	if got := products("--node-name", "gpu-a", "--simulate-node-profiles", list); got["NVIDIA A100-SXM4-80GB"] != 4 || len(got) != 1 {
		t.Errorf("listed node publishes %v, want 4 x NVIDIA A100-SXM4-80GB", got)
	}
	if got := products("--node-name", "gpu-b", "--simulate-node-profiles", list); got["NVIDIA H100 80GB HBM3"] != 2 || len(got) != 1 {
		t.Errorf("unlisted node publishes %v, want --simulate's 2 x H100", got)
	}
	t.Setenv("SIMULATE_NODE_PROFILES", "gpu-b=h200x1,gpu-a=a100-80gbx4")
	if got := products("--node-name", "gpu-a"); got["NVIDIA A100-SXM4-80GB"] != 4 {
		t.Errorf("from SIMULATE_NODE_PROFILES: publishes %v", got)
	}
}
