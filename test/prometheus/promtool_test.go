// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package prometheus checks the chart's alert rules with Debian's promtool
// (hack/prometheus.sh unpacks it into the cache; make test passes its
// directory in GDRA_PROMETHEUS_BIN): `promtool check rules` on the rules
// file and `promtool test rules` on rules_test.yaml, which fires each alert.
package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const rulesFile = "../../deployments/helm/gpu-dra-driver/files/prometheus-rules.yaml"

// promtool is the binary of GDRA_PROMETHEUS_BIN (set by make test, so a
// missing one fails there), else the cached one, else the test skips.
func promtool(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("GDRA_PROMETHEUS_BIN"); dir != "" {
		return filepath.Join(dir, "promtool")
	}
	out, err := exec.Command("../../hack/prometheus.sh").Output()
	if err != nil {
		t.Skipf("promtool not available (hack/prometheus.sh: %v); make test fetches it", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "promtool")
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	out := run(t, "check", "rules", rulesFile)
	if !strings.Contains(out, "SUCCESS: 4 rules found") {
		t.Errorf("promtool check rules:\n%s", out)
	}
}

// TestPromtoolTestRules: every alert fires where rules_test.yaml says
// (promtool exits 1 and prints FAILED otherwise).
func TestPromtoolTestRules(t *testing.T) {
	out := run(t, "test", "rules", "rules_test.yaml")
	if strings.Contains(out, "FAILED") || !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
}
