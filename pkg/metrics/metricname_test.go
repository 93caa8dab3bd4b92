// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// TestMetricNamesAreRegistered: every name in pkg/metrics/metricname is a
// metric the plugin exports, and every gpu_dra_ metric it exports is named
// there, so readers of the names (pkg/diagnose) never look for a metric
// that does not exist.
func TestMetricNamesAreRegistered(t *testing.T) {
	m := New()
	m.ObservePreparedDevices(func() int { return 0 })
	m.ObserveUnrestoredClaims(func() int { return 0 })
	m.ObserveRegistration(func() bool { return true })
	m.ObserveAllocation(func() []GPUAllocation {
		return []GPUAllocation{{GPU: "0", UUID: "GPU-0", Model: "NVIDIA H100", State: metricname.StateFree, MigSlices: 8}}
	})
	// Vectors show up once they have a child.
	m.Errors.WithLabelValues(metricname.OperationPrepare).Inc()
	m.DeviceHealthy.WithLabelValues("gpu-0", "GPU-0").Set(1)
	m.XIDEvents.WithLabelValues("79").Inc()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), metricname.Prefix) {
			exported = append(exported, f.GetName())
		}
	}
	named := slices.Clone(metricname.All)
	slices.Sort(exported)
	slices.Sort(named)
	if !slices.Equal(exported, named) {
		t.Errorf("exported %v, named in metricname %v", exported, named)
	}
}

// TestErrorsStartAtZero: each operation's error counter is exported at 0
// before the first error, so that rate() in the dashboard and the alert
// rules counts the first one.
func TestErrorsStartAtZero(t *testing.T) {
	fams, err := New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, f := range fams {
		if f.GetName() != metricname.Errors {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("%v starts at %v", m.GetLabel(), m.GetCounter().GetValue())
			}
			ops = append(ops, m.GetLabel()[0].GetValue())
		}
	}
	slices.Sort(ops)
	if want := []string{metricname.OperationBackground, metricname.OperationPrepare, metricname.OperationRecovery, metricname.OperationUnprepare}; !slices.Equal(ops, want) {
		t.Errorf("error counters %v, want %v", ops, want)
	}
}
