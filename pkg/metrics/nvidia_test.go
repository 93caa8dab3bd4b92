// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// nvidiaMetrics are the series NVIDIA's kubelet plugin exports, with their
// types and label names, as pkg/metrics/dra_requests.go of
// kubernetes-sigs/dra-driver-nvidia-gpu (95932046) declares them
// (Namespace "nvidia_dra"). requests_inflight has no counterpart here.
var nvidiaMetrics = map[string]struct {
	typ    dto.MetricType
	labels []string
}{
	"nvidia_dra_requests_total":              {dto.MetricType_COUNTER, []string{"driver", "operation"}},
	"nvidia_dra_request_duration_seconds":    {dto.MetricType_HISTOGRAM, []string{"driver", "operation"}},
	"nvidia_dra_prepared_devices":            {dto.MetricType_GAUGE, []string{"node", "driver", "device_type"}},
	"nvidia_dra_node_prepare_errors_total":   {dto.MetricType_COUNTER, []string{"driver", "error_type"}},
	"nvidia_dra_node_unprepare_errors_total": {dto.MetricType_COUNTER, []string{"driver", "error_type"}},
}

func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// series finds the one series of f whose labels include want.
func series(t *testing.T, f *dto.MetricFamily, want map[string]string) *dto.Metric {
	t.Helper()
	var found []*dto.Metric
	for _, m := range f.GetMetric() {
		l := labels(m)
		match := true
		for k, v := range want {
			match = match && l[k] == v
		}
		if match {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series", f.GetName(), want, len(found))
	}
	return found[0]
}

// TestNVIDIANamesAliasOurSeries (issue 58, item 5): NVIDIA's names are
// exported with NVIDIA's types and label names, each carrying the value of
// the plugin's own series it aliases, and every nvidia_dra_ name exported
// is in metricname.NVIDIAAll.
func TestNVIDIANamesAliasOurSeries(t *testing.T) {
	m := New()
	m.Identify("node-1", "gpu.example.com")
	m.ObservePreparedDevicesByKind(func() map[configapi.DeviceKind]int {
		return map[configapi.DeviceKind]int{configapi.WholeGPU: 2, configapi.Monitor: 1, configapi.DynamicMIG: 3, configapi.MIG: 1, configapi.VFIO: 1}
	})
	for _, d := range []float64{0.003, 0.2, 4} {
		m.PrepareDuration.Observe(d)
	}
	m.UnprepareDuration.Observe(0.01)
	m.Errors.WithLabelValues(metricname.OperationPrepare).Inc()
	m.Errors.WithLabelValues(metricname.OperationUnprepare).Add(2)
	m.Errors.WithLabelValues(metricname.OperationBackground).Inc() // NVIDIA has no name for it
	fams := gather(t, m)

	var exported []string
	for name, f := range fams {
		if !strings.HasPrefix(name, metricname.NVIDIAPrefix) {
			continue
		}
		exported = append(exported, name)
		want, ok := nvidiaMetrics[name]
		if !ok {
			t.Errorf("%s: not one of NVIDIA's names", name)
			continue
		}
		if f.GetType() != want.typ {
			t.Errorf("%s: type %v, NVIDIA's is %v", name, f.GetType(), want.typ)
		}
		for _, s := range f.GetMetric() {
			var got []string
			for n := range labels(s) {
				got = append(got, n)
			}
			if w := slices.Sorted(slices.Values(want.labels)); !slices.Equal(slices.Sorted(slices.Values(got)), w) {
				t.Errorf("%s: labels %v, NVIDIA's are %v", name, got, w)
			}
		}
	}
	slices.Sort(exported)
	if named := slices.Sorted(slices.Values(metricname.NVIDIAAll)); !slices.Equal(exported, named) {
		t.Errorf("exported %v, named in metricname.NVIDIAAll %v", exported, named)
	}

	drv := map[string]string{"driver": "gpu.example.com"}
	with := func(k, v string) map[string]string { return map[string]string{"driver": drv["driver"], k: v} }
	for op, ours := range map[string]string{"prepare": metricname.PrepareDuration, "unprepare": metricname.UnprepareDuration} {
		h := fams[ours].GetMetric()[0].GetHistogram()
		if got := series(t, fams["nvidia_dra_requests_total"], with("operation", op)).GetCounter().GetValue(); got != float64(h.GetSampleCount()) {
			t.Errorf("requests_total{%s} %v, want %s's count %d", op, got, ours, h.GetSampleCount())
		}
		alias := series(t, fams["nvidia_dra_request_duration_seconds"], with("operation", op)).GetHistogram()
		if alias.GetSampleCount() != h.GetSampleCount() || alias.GetSampleSum() != h.GetSampleSum() || len(alias.GetBucket()) != len(h.GetBucket()) {
			t.Errorf("request_duration_seconds{%s}: %d, %v, %d buckets; %s has %d, %v, %d", op,
				alias.GetSampleCount(), alias.GetSampleSum(), len(alias.GetBucket()), ours, h.GetSampleCount(), h.GetSampleSum(), len(h.GetBucket()))
		}
		for i, b := range alias.GetBucket() {
			if hb := h.GetBucket()[i]; b.GetUpperBound() != hb.GetUpperBound() || b.GetCumulativeCount() != hb.GetCumulativeCount() {
				t.Errorf("request_duration_seconds{%s} bucket %v: %d, ours %v: %d", op, b.GetUpperBound(), b.GetCumulativeCount(), hb.GetUpperBound(), hb.GetCumulativeCount())
			}
		}
	}
	for name, want := range map[string]struct {
		errorType string
		value     float64
	}{
		"nvidia_dra_node_prepare_errors_total":   {"prepare_devices", 1},
		"nvidia_dra_node_unprepare_errors_total": {"unprepare_devices", 2},
	} {
		if got := series(t, fams[name], with("error_type", want.errorType)).GetCounter().GetValue(); got != want.value {
			t.Errorf("%s %v, want %v", name, got, want.value)
		}
	}
	for typ, want := range map[string]float64{"gpu": 3, "mig": 4, "vfio": 1, "unknown": 0} {
		s := series(t, fams["nvidia_dra_prepared_devices"], map[string]string{"node": "node-1", "driver": "gpu.example.com", "device_type": typ})
		if got := s.GetGauge().GetValue(); got != want {
			t.Errorf("prepared_devices{device_type=%s} %v, want %v", typ, got, want)
		}
	}
	if got := fams[metricname.PreparedDevices].GetMetric()[0].GetGauge().GetValue(); got != 8 {
		t.Errorf("%s %v, want the sum 8", metricname.PreparedDevices, got)
	}
}

// TestNVIDIANamesBeforeIdentify: before the plugin names its node and
// driver, NVIDIA's names carry the default driver name (so that queries
// for driver="gpu.nvidia.com" match the default installation) and an empty
// node, which Prometheus reads as absent: the chart's PodMonitor's node
// label then applies. Error series start at 0, so rate() sees the first.
func TestNVIDIANamesBeforeIdentify(t *testing.T) {
	m := New()
	m.ObservePreparedDevicesByKind(func() map[configapi.DeviceKind]int { return nil })
	fams := gather(t, m)
	for _, name := range metricname.NVIDIAAll {
		f, ok := fams[name]
		if !ok {
			t.Errorf("%s not exported", name)
			continue
		}
		for _, s := range f.GetMetric() {
			l := labels(s)
			if l["driver"] != DefaultDriverName || l["node"] != "" {
				t.Errorf("%s: labels %v", name, l)
			}
			if v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount()); v != 0 {
				t.Errorf("%s%v: %v before anything happened", name, l, v)
			}
		}
	}
}

func TestNVIDIADeviceType(t *testing.T) {
	for k, want := range map[configapi.DeviceKind]string{
		configapi.WholeGPU: "gpu", configapi.Monitor: "gpu", configapi.MIG: "mig", configapi.DynamicMIG: "mig", configapi.VFIO: "vfio", "other": "unknown",
	} {
		if got := NVIDIADeviceType(k); got != want {
			t.Errorf("%s: %s, want %s", k, got, want)
		}
	}
}
