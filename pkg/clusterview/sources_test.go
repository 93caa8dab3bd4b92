// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestPluginSelectorMatchesChart: PluginSelector selects the pods the
// chart's selectorLabels give the kubelet plugin.
func TestPluginSelectorMatchesChart(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deployments", "helm", "gpu-dra-driver", "templates", "_helpers.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), `{{- define "gpu-dra-driver.selectorLabels" -}}`)
	block, _, _ = strings.Cut(block, "{{- end -}}")
	if !ok {
		t.Fatal("no gpu-dra-driver.selectorLabels in _helpers.tpl")
	}
	chart := labels.Set{}
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		chart[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	sel, err := labels.Parse(PluginSelector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(chart) {
		t.Errorf("PluginSelector %q does not select the chart's plugin pods (%v)", PluginSelector, chart)
	}
}
