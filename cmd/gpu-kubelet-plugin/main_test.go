package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/slices"
)

// TestPrintSlices runs the command as a user would and checks its output
// against the API's limits and naming rules.
func TestPrintSlices(t *testing.T) {
	for _, tc := range []struct {
		profile, model string
		gpus           int
		memory         string
		dynamicMIG     bool
		migDevices     int
	}{
		{"h100x8", "NVIDIA H100 80GB HBM3", 8, "80Gi", false, 0},
		{"a100-40gbx8", "NVIDIA A100-SXM4-40GB", 8, "40Gi", false, 0},
		{"h100x8", "NVIDIA H100 80GB HBM3", 8, "80Gi", true, 8 * 28},
		{"a100-80gbx8", "NVIDIA A100-SXM4-80GB", 8, "80Gi", true, 8 * 25},
	} {
		t.Run(fmt.Sprintf("%s/dynamic-mig=%v", tc.profile, tc.dynamicMIG), func(t *testing.T) {
			cmd := newCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs([]string{"--simulate", tc.profile, "--node-name", "n1", "--print-slices", fmt.Sprintf("--feature-gates=DynamicMIG=%v", tc.dynamicMIG)})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			pool := resourceslice.Pool{}
			uuids := map[string]bool{}
			parents := map[string]int{}
			for _, doc := range strings.Split(out.String(), "---\n") {
				if strings.TrimSpace(doc) == "" {
					continue
				}
				var s resourceapi.ResourceSlice
				if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
					t.Fatalf("output is not a ResourceSlice: %v\n%s", err, doc)
				}
				if s.Spec.Driver != "gpu.nvidia.com" || s.Spec.NodeName == nil || *s.Spec.NodeName != "n1" || s.Spec.Pool.Name != "n1" {
					t.Fatalf("slice spec header wrong: %+v", s.Spec.Pool)
				}
				for _, d := range s.Spec.Devices {
					if *d.Attributes["productName"].StringValue != tc.model {
						t.Errorf("%s: productName %q", d.Name, *d.Attributes["productName"].StringValue)
					}
					if *d.Attributes["type"].StringValue == "mig" {
						parents[*d.Attributes["parentUUID"].StringValue]++
						continue
					}
					if got := d.Capacity["memory"].Value; got.String() != tc.memory {
						t.Errorf("%s: memory %s, want %s", d.Name, got.String(), tc.memory)
					}
					uuids[*d.Attributes["uuid"].StringValue] = true
				}
				pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: s.Spec.Devices, SharedCounters: s.Spec.SharedCounters})
			}
			if len(uuids) != tc.gpus {
				t.Fatalf("want %d distinct GPUs, got %d", tc.gpus, len(uuids))
			}
			migs := 0
			for parent, n := range parents {
				if !uuids[parent] {
					t.Errorf("MIG devices name unknown parent %s", parent)
				}
				migs += n
			}
			if migs != tc.migDevices {
				t.Errorf("%d MIG devices published, want %d", migs, tc.migDevices)
			}
			t.Logf("%s: %d devices in %d slices", tc.profile, tc.gpus+migs, len(pool.Slices))
			if err := slices.Validate(resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": pool}}); err != nil {
				t.Fatalf("printed slices break API rules: %v", err)
			}
		})
	}
}

func TestPrintSlicesIsStable(t *testing.T) {
	run := func(node string) string {
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--simulate", "h100x2", "--node-name", node, "--print-slices"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if a, b := run("n1"), run("n1"); a != b {
		t.Fatal("two runs for the same node published different devices")
	}
	if a, b := run("n1"), run("n2"); a == b {
		t.Fatal("two nodes got identical GPU UUIDs")
	}
}

func TestBadFlagsSayWhatToFix(t *testing.T) {
	for args, want := range map[string]string{
		"--simulate h100x8 --print-slices":                         "--node-name is required",
		"--simulate h900x8 --node-name n1 --print-slices":          `unknown model "h900"`,
		"--simulate h100x0 --node-name n1 --print-slices":          "must be a number from 1 to 64",
		"--driver-root /nonexistent --node-name n1 --print-slices": "--driver-root",
	} {
		cmd := newCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(strings.Fields(args))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", args, err, want)
		}
	}
}

// TestPrintSlicesFractionalPreview shows a shareable GPU with its request policy.
func TestPrintSlicesFractionalPreview(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--simulate", "h100x1", "--node-name", "n1", "--fractional-memory", "--print-slices"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var s resourceapi.ResourceSlice
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(out.String(), "---\n")), &s); err != nil {
		t.Fatal(err)
	}
	d := s.Spec.Devices[0]
	mem := d.Capacity["memory"]
	if len(s.Spec.Devices) != 1 || d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || mem.RequestPolicy == nil || mem.RequestPolicy.ValidRange == nil {
		t.Fatalf("shareable device not published as such:\n%s", out.String())
	}
	if step := mem.RequestPolicy.ValidRange.Step; step == nil || step.String() != "1Gi" {
		t.Fatalf("memory step %v", step)
	}
	if _, ok := d.Capacity["computePercentage"]; !ok {
		t.Fatal("no computePercentage capacity")
	}
}
