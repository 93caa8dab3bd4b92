// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The scheduler's plugin histograms, scraped from its /metrics before and
// after a run; the difference of the cumulative buckets is that run's
// distribution. The scheduler samples plugin metrics (about one scheduling
// cycle in ten), so these are per-call times of a sample of calls.

import (
	"fmt"
	"io"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// hist is a cumulative histogram: upper bounds and their counts.
type hist struct {
	bounds []float64
	counts []float64
	count  float64
	sum    float64
}

// pluginHists maps "Filter", "PreBind", ... to the DynamicResources
// plugin's histogram, summed over the status label.
type pluginHists map[string]*hist

func (c *cluster) scrapePlugin(plugin string) (pluginHists, error) {
	r, err := c.get(c.schedURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Body.Close() }()
	if r.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 512))
		return nil, fmt.Errorf("scheduler /metrics: %s: %s", r.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r.Body)
	if err != nil {
		return nil, err
	}
	out := pluginHists{}
	fam := fams["scheduler_plugin_execution_duration_seconds"]
	if fam == nil {
		return out, nil
	}
	for _, m := range fam.GetMetric() {
		var ext string
		match := false
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "plugin":
				match = l.GetValue() == plugin
			case "extension_point":
				ext = l.GetValue()
			}
		}
		if !match || m.GetHistogram() == nil {
			continue
		}
		out.add(ext, m.GetHistogram())
	}
	return out, nil
}

func (ph pluginHists) add(ext string, h *dto.Histogram) {
	cur := ph[ext]
	if cur == nil {
		cur = &hist{}
		for _, b := range h.GetBucket() {
			cur.bounds = append(cur.bounds, b.GetUpperBound())
		}
		cur.counts = make([]float64, len(cur.bounds))
		ph[ext] = cur
	}
	for i, b := range h.GetBucket() {
		if i < len(cur.counts) {
			cur.counts[i] += float64(b.GetCumulativeCount())
		}
	}
	cur.count += float64(h.GetSampleCount())
	cur.sum += h.GetSampleSum()
}

// minus returns after - before for one extension point.
func minus(after, before pluginHists, ext string) *hist {
	a := after[ext]
	if a == nil {
		return &hist{}
	}
	d := &hist{bounds: a.bounds, counts: append([]float64(nil), a.counts...), count: a.count, sum: a.sum}
	if b := before[ext]; b != nil {
		for i := range d.counts {
			if i < len(b.counts) {
				d.counts[i] -= b.counts[i]
			}
		}
		d.count -= b.count
		d.sum -= b.sum
	}
	return d
}

// quantile interpolates linearly inside the bucket that holds q, as
// Prometheus' histogram_quantile does. NaN without samples.
func (h *hist) quantile(q float64) float64 {
	if h == nil || h.count <= 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	i := sort.Search(len(h.counts), func(i int) bool { return h.counts[i] >= rank })
	if i >= len(h.bounds) || math.IsInf(h.bounds[i], 1) {
		// Beyond the last finite bound (22 ms for this metric).
		return math.Inf(1)
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.bounds[i-1], h.counts[i-1]
	}
	in := h.counts[i] - below
	if in <= 0 {
		return h.bounds[i]
	}
	return lo + (h.bounds[i]-lo)*(rank-below)/in
}

func (h *hist) mean() float64 {
	if h == nil || h.count <= 0 {
		return math.NaN()
	}
	return h.sum / h.count
}
