// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

// TestNVIDIACompat's metrics helpers: scraping node 1's plugin and comparing its gpu_dra_* and nvidia_dra_* series.

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// nvcScrape reads node 1's plugin /metrics, on the port of its probes
// (kubeletPlugin.metricsPort), from its pod IP (the plugin runs on the host
// network here, as hack/cluster/deploy.sh installs it).
func nvcScrape(t *testing.T) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	p := pluginPod(t)
	probe := p.Spec.Containers[0].LivenessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatal("the plugin has no HTTP liveness probe")
	}
	url := fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, probe.HTTPGet.Port.IntValue())
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %v", url, resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(string(body)))
}

func nvcLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// nvcCheckAliases checks, in one scrape, what docs/monitoring.md promises
// of NVIDIA's names: nvidia_dra_prepared_devices is gpu_dra_prepared_devices
// by device type (gpu, mig, vfio, unknown; zeros exported) labelled with
// node 1 and the driver, and want gives each type's count (0 when
// missing); nvidia_dra_requests_total and nvidia_dra_request_duration_seconds
// are the counts and buckets of gpu_dra_{prepare,unprepare}_duration_seconds;
// nvidia_dra_node_{prepare,unprepare}_errors_total are
// gpu_dra_errors_total{operation=prepare,unprepare}. A scrape may fall
// between two collectors of a prepare in flight, so it is retried a while.
// It returns the requests counted, by operation.
func nvcCheckAliases(t *testing.T, want map[string]float64) map[string]float64 {
	t.Helper()
	var report string
	var requests map[string]float64
	waitFor(t, "nvidia_dra_* series equal to the plugin's own", 30*time.Second, func() (bool, string) {
		fams, err := nvcScrape(t)
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		fam := func(name string, typ dto.MetricType) []*dto.Metric {
			f := fams[name]
			if f == nil {
				bad = append(bad, name+" missing")
				return nil
			}
			if f.GetType() != typ {
				bad = append(bad, fmt.Sprintf("%s is a %s, want a %s", name, f.GetType(), typ))
			}
			return f.Metric
		}
		var lines []string

		// Prepared devices.
		ours := fam("gpu_dra_prepared_devices", dto.MetricType_GAUGE)
		if len(ours) != 1 {
			bad = append(bad, fmt.Sprintf("%d gpu_dra_prepared_devices series, want 1", len(ours)))
			return false, strings.Join(bad, "; ")
		}
		total, sum := ours[0].GetGauge().GetValue(), 0.0
		byType := map[string]float64{}
		for _, m := range fam("nvidia_dra_prepared_devices", dto.MetricType_GAUGE) {
			l := nvcLabels(m)
			if l["node"] != hostNode() || l["driver"] != driverName || len(l) != 3 {
				bad = append(bad, fmt.Sprintf("nvidia_dra_prepared_devices labels %v, want node %s, driver %s, device_type", l, hostNode(), driverName))
			}
			byType[l["device_type"]] = m.GetGauge().GetValue()
			sum += m.GetGauge().GetValue()
		}
		for _, typ := range []string{"gpu", "mig", "vfio", "unknown"} {
			if v, ok := byType[typ]; !ok || v != want[typ] {
				bad = append(bad, fmt.Sprintf("nvidia_dra_prepared_devices{device_type=%q} %v (exported: %v), want %v", typ, v, ok, want[typ]))
			}
		}
		if len(byType) != 4 || sum != total {
			bad = append(bad, fmt.Sprintf("nvidia_dra_prepared_devices %v sum to %v, gpu_dra_prepared_devices is %v", byType, sum, total))
		}
		lines = append(lines, fmt.Sprintf("gpu_dra_prepared_devices %v = nvidia_dra_prepared_devices %v", total, byType))

		// Requests and their durations, by operation.
		durations := map[string]*dto.Histogram{}
		requests = map[string]float64{}
		for _, m := range fam("nvidia_dra_requests_total", dto.MetricType_COUNTER) {
			l := nvcLabels(m)
			if l["driver"] != driverName {
				bad = append(bad, fmt.Sprintf("nvidia_dra_requests_total labels %v", l))
			}
			requests[l["operation"]] = m.GetCounter().GetValue()
		}
		for _, m := range fam("nvidia_dra_request_duration_seconds", dto.MetricType_HISTOGRAM) {
			l := nvcLabels(m)
			if l["driver"] != driverName {
				bad = append(bad, fmt.Sprintf("nvidia_dra_request_duration_seconds labels %v", l))
			}
			durations[l["operation"]] = m.GetHistogram()
		}
		for _, op := range []string{"prepare", "unprepare"} {
			ms := fam("gpu_dra_"+op+"_duration_seconds", dto.MetricType_HISTOGRAM)
			if len(ms) != 1 {
				bad = append(bad, fmt.Sprintf("%d gpu_dra_%s_duration_seconds series", len(ms), op))
				continue
			}
			h := ms[0].GetHistogram()
			if v, ok := requests[op]; !ok || v != float64(h.GetSampleCount()) {
				bad = append(bad, fmt.Sprintf("nvidia_dra_requests_total{operation=%q} %v (exported: %v), gpu_dra_%s_duration_seconds_count %d", op, v, ok, op, h.GetSampleCount()))
			}
			n := durations[op]
			if n == nil || n.GetSampleCount() != h.GetSampleCount() || n.GetSampleSum() != h.GetSampleSum() || fmt.Sprint(nvcBuckets(n)) != fmt.Sprint(nvcBuckets(h)) {
				bad = append(bad, fmt.Sprintf("nvidia_dra_request_duration_seconds{operation=%q} count %d sum %v buckets %v; gpu_dra_%s_duration_seconds count %d sum %v buckets %v",
					op, n.GetSampleCount(), n.GetSampleSum(), nvcBuckets(n), op, h.GetSampleCount(), h.GetSampleSum(), nvcBuckets(h)))
			}
			lines = append(lines, fmt.Sprintf("%s: %d requests", op, h.GetSampleCount()))
		}

		// Errors.
		errs := map[string]float64{}
		for _, m := range fam("gpu_dra_errors_total", dto.MetricType_COUNTER) {
			errs[nvcLabels(m)["operation"]] = m.GetCounter().GetValue()
		}
		for _, op := range []string{"prepare", "unprepare"} {
			ms := fam("nvidia_dra_node_"+op+"_errors_total", dto.MetricType_COUNTER)
			ourErrs, ok := errs[op]
			if len(ms) != 1 || !ok {
				bad = append(bad, fmt.Sprintf("%d nvidia_dra_node_%s_errors_total series; gpu_dra_errors_total{operation=%q} exported: %v", len(ms), op, op, ok))
				continue
			}
			l := nvcLabels(ms[0])
			if l["driver"] != driverName || l["error_type"] != op+"_devices" || len(l) != 2 || ms[0].GetCounter().GetValue() != ourErrs {
				bad = append(bad, fmt.Sprintf("nvidia_dra_node_%s_errors_total%v %v, gpu_dra_errors_total{operation=%q} %v", op, l, ms[0].GetCounter().GetValue(), op, ourErrs))
			}
			lines = append(lines, fmt.Sprintf("%s errors %v", op, ourErrs))
		}
		report = strings.Join(lines, "; ")
		return len(bad) == 0, strings.Join(bad, "; ")
	})
	t.Logf("NVIDIA's names agree with ours: %s", report)
	return requests
}

// nvcBuckets is a histogram's cumulative counts by upper bound.
func nvcBuckets(h *dto.Histogram) []string {
	var out []string
	for _, b := range h.GetBucket() {
		out = append(out, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	return out
}
