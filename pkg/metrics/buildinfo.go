// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// buildInfo is gpu_dra_build_info: constant 1, labelled with the build.
// The usual Prometheus "info" metric: a dashboard or an alert joins it
// (on the pod's labels) to tell which version each node runs, e.g.
// during a rolling update, or `count by (version) (gpu_dra_build_info)`.
func buildInfo(b version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: metricname.BuildInfo,
		Help: "Always 1; its labels name the plugin's build: version, commit and Go version.",
		ConstLabels: prometheus.Labels{
			metricname.LabelVersion:   b.Version,
			metricname.LabelCommit:    b.Commit,
			metricname.LabelGoVersion: b.GoVersion,
		},
	})
	g.Set(1)
	return g
}
