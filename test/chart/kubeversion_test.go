// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// oldestTested is the Kubernetes version make e2e-oldest runs the e2e
// subset on (hack/e2e-subset.sh <version>).
func oldestTested(t *testing.T) (major, minor int, version string) {
	t.Helper()
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^e2e-oldest:.*\n\thack/e2e-subset\.sh (\d+)\.(\d+)\.(\d+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile: no e2e-oldest target running hack/e2e-subset.sh <x.y.z>")
	}
	major, _ = strconv.Atoi(string(m[1]))
	minor, _ = strconv.Atoi(string(m[2]))
	return major, minor, fmt.Sprintf("%s.%s.%s", m[1], m[2], m[3])
}

// TestKubeVersionIsTheOldestTested: the chart admits exactly the minors
// from the one make e2e-oldest tests, and helm refuses the minor before it
// at install, with a message naming the constraint, instead of the cluster
// failing at the first claim.
func TestKubeVersionIsTheOldestTested(t *testing.T) {
	major, minor, version := oldestTested(t)
	data, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	// "-0" admits the pre-releases and provider suffixes of that minor
	// (v1.36.0-gke.100), which a plain ">=1.36.0" would refuse.
	if want := fmt.Sprintf(">=%d.%d.0-0", major, minor); chart.KubeVersion != want {
		t.Fatalf("Chart.yaml kubeVersion %q, want %q: the oldest version tested is %s (make e2e-oldest)", chart.KubeVersion, want, version)
	}
	helm := helmBinary(t)
	if out, err := exec.Command(helm, "template", "x", chartDir, "--kube-version", "v"+version).CombinedOutput(); err != nil {
		t.Fatalf("helm template --kube-version v%s: %v\n%s", version, err, out)
	}
	older := fmt.Sprintf("v%d.%d.0", major, minor-1)
	out, err := exec.Command(helm, "template", "x", chartDir, "--kube-version", older).CombinedOutput()
	if err == nil || !strings.Contains(string(out), chart.KubeVersion) {
		t.Fatalf("helm template --kube-version %s: %v, want a refusal naming kubeVersion %s\n%s", older, err, chart.KubeVersion, out)
	}
}
