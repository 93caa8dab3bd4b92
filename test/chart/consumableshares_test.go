// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// consumableSharesExample is the values file docs/install.md and
// docs/sharing.md give for NVIDIA's consumable-shares mode.
const consumableSharesExample = "../../docs/examples/consumable-shares.yaml"

// sharing.consumableShares renders the plugin's --consumable-shares flags;
// the default renders none (the plugin's default: none).
func TestChartConsumableSharesFlags(t *testing.T) {
	if _, ok := flag(plugin(t, render(t)), "--consumable-shares"); ok {
		t.Error("--consumable-shares rendered by default")
	}
	for _, tc := range []struct {
		set  []string
		want map[string]string // flag -> value; "" absent
	}{
		{[]string{"sharing.consumableShares.mode=memory"}, map[string]string{"--consumable-shares": "memory", "--consumable-shares-count": "4", "--consumable-shares-gpus": ""}},
		{[]string{"sharing.consumableShares.mode=integer", "sharing.consumableShares.shares=10", "sharing.consumableShares.gpus={0,3}"}, map[string]string{"--consumable-shares": "integer", "--consumable-shares-count": "10", "--consumable-shares-gpus": "0,3"}},
		{[]string{"sharing.consumableShares.mode=unlimited", "sharing.fractionalMemory=true", "sharing.fractionalMemoryGPUs={1}", "sharing.consumableShares.gpus={0}"}, map[string]string{"--consumable-shares": "unlimited", "--fractional-memory-gpus": "1"}},
	} {
		c := plugin(t, render(t, tc.set...))
		for name, want := range tc.want {
			got, ok := flag(c, name)
			if want == "" && ok {
				t.Errorf("%v: %s=%s rendered", tc.set, name, got)
			} else if want != "" && got != want {
				t.Errorf("%v: %s=%q, want %q", tc.set, name, got, want)
			}
		}
	}
}

// Combinations the plugin would refuse fail at helm time, naming the
// values and the fix.
func TestChartConsumableSharesConflictsFail(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"sharing.consumableShares.mode=memory", "sharing.strategies={TimeSlicing}"}, "add MPS to sharing.strategies"},
		{[]string{"sharing.consumableShares.mode=unlimited", "sharing.fractionalMemory=true"}, "sharing.consumableShares.gpus and sharing.fractionalMemoryGPUs"},
		{[]string{"sharing.consumableShares.mode=integer", "sharing.consumableShares.gpus={1}", "sharing.fractionalMemory=true", "sharing.fractionalMemoryGPUs={0,1}"}, "offer the same GPUs"},
		{[]string{"sharing.consumableShares.mode=4"}, "sharing/consumableShares/mode"},
		{[]string{"sharing.consumableShares.mode=integer", "sharing.consumableShares.shares=0"}, "sharing/consumableShares/shares"},
	} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2"}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
		if err == nil {
			t.Errorf("%v rendered", tc.set)
		} else if !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: error does not say %q:\n%.400s", tc.set, tc.want, out)
		}
	}
}

// The documented values file for NVIDIA's consumable-shares mode renders
// over the chart's defaults into NVIDIA's unlimited mode on every GPU,
// with the chart's other sharing left as it is.
func TestChartConsumableSharesExample(t *testing.T) {
	out, err := exec.Command(helmBinary(t), "template", "gpu-dra-driver", chartDir, "--namespace", "gpu-dra-driver",
		"--kube-version", "v1.37.2", "-f", consumableSharesExample).Output()
	if err != nil {
		t.Fatalf("helm template -f %s: %v", consumableSharesExample, err)
	}
	c := plugin(t, daemonSetOf(t, out))
	for name, want := range map[string]string{"--consumable-shares": "unlimited", "--sharing-strategies": "TimeSlicing,MPS", "--fractional-memory": "false"} {
		if got, _ := flag(c, name); got != want {
			t.Errorf("%s=%q, want %q", name, got, want)
		}
	}
	if got, ok := flag(c, "--consumable-shares-gpus"); ok {
		t.Errorf("--consumable-shares-gpus=%s: the example offers every GPU", got)
	}
	// TestChartDocumentedValuesExamplesPassTheSchema renders it too.
	found := false
	for _, ex := range documentedExamples(t) {
		found = found || ex.where == "docs/examples/consumable-shares.yaml"
	}
	if !found {
		t.Error("docs/examples/consumable-shares.yaml is not among the documented values examples")
	}
}

// daemonSetOf is the plugin's DaemonSet in rendered manifests.
func daemonSetOf(t *testing.T, out []byte) *appsv1.DaemonSet {
	t.Helper()
	for _, doc := range strings.Split(string(out), "\n---") {
		if strings.Contains(doc, "kind: DaemonSet") {
			ds := &appsv1.DaemonSet{}
			if err := yaml.UnmarshalStrict([]byte(doc), ds); err != nil {
				t.Fatalf("DaemonSet: %v", err)
			}
			return ds
		}
	}
	t.Fatal("no DaemonSet rendered")
	return nil
}
