// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// TestBuildInfo: gpu_dra_build_info is 1 with this binary's version,
// commit and Go version as labels.
func TestBuildInfo(t *testing.T) {
	fams, err := New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := version.Get()
	for _, f := range fams {
		if f.GetName() != metricname.BuildInfo {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d series, want 1", len(f.GetMetric()))
		}
		m := f.GetMetric()[0]
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("value %v, want 1", m.GetGauge().GetValue())
		}
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for name, v := range map[string]string{metricname.LabelVersion: want.Version, metricname.LabelCommit: want.Commit, metricname.LabelGoVersion: want.GoVersion} {
			if labels[name] != v || v == "" {
				t.Errorf("label %s = %q, want %q", name, labels[name], v)
			}
		}
		return
	}
	t.Fatalf("%s not exported", metricname.BuildInfo)
}
