// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

func median(rs []runResult, f func(runResult) float64) float64 {
	var v []float64
	for _, r := range rs {
		if x := f(r); !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func markdown(results []runResult) string {
	type key struct {
		layout    string
		nodes     int
		fill, pct int
		mode      string
	}
	groups := map[key][]runResult{}
	var keys []key
	for _, r := range results {
		k := key{r.Layout, r.Nodes, r.Fill, r.PctScore, r.Mode}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| layout | nodes | fill | nodes to score | claims | runs | pods (bound) | pods/s | scheduler CPU per pod | create→bind p50 / p99 | Filter p50 / p99 / mean | PreBind p50 / mean | apiserver RSS | scheduler RSS | scheduler / apiserver / machine CPU (cores) |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		rs := groups[k]
		minBound := slices.MinFunc(rs, func(a, b runResult) int { return a.Bound - b.Bound }).Bound
		pct := "default"
		if k.pct > 0 {
			pct = fmt.Sprintf("%d%%", k.pct)
		}
		fmt.Fprintf(&b, "| %s | %d | %d%% | %s | %s | %d | %d (%d) | %.1f | %s | %.2f s / %.2f s | %s / %s / %s | %s / %s | %.0f MiB | %.0f MiB | %.2f / %.2f / %.2f |\n",
			k.layout, k.nodes, k.fill, pct, k.mode, len(rs), rs[0].Pods, minBound,
			median(rs, func(r runResult) float64 { return r.PodsPerSec }),
			ms(median(rs, func(r runResult) float64 { return r.SchedCPUPod })),
			median(rs, func(r runResult) float64 { return r.P50 }), median(rs, func(r runResult) float64 { return r.P99 }),
			ms(median(rs, func(r runResult) float64 { return r.FilterP50 })), ms(median(rs, func(r runResult) float64 { return r.FilterP99 })),
			ms(median(rs, func(r runResult) float64 { return r.FilterMean })),
			ms(median(rs, func(r runResult) float64 { return r.PreBindP50 })), ms(median(rs, func(r runResult) float64 { return r.PreBindMean })),
			median(rs, func(r runResult) float64 { return r.APIRSS }), median(rs, func(r runResult) float64 { return r.SchedRSS }),
			median(rs, func(r runResult) float64 { return r.SchedCores }), median(rs, func(r runResult) float64 { return r.APICores }),
			median(rs, func(r runResult) float64 { return r.TotalCores }))
	}
	return b.String()
}
