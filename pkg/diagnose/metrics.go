// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// The plugin's metrics are named in pkg/metrics/metricname; this is the
// kubelet's count of registered plugin sockets
// (pkg/kubelet/pluginmanager/metrics).
const metricKubeletPlugins = "plugin_manager_total_plugins"

func parseMetrics(text string) map[string]*dto.MetricFamily {
	if text == "" {
		return nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil
	}
	return fams
}

// pluginMetrics summarises the plugin's counters on a node, one line each.
func pluginMetrics(text string) []string {
	fams := parseMetrics(text)
	var out []string
	if f := fams[metricname.PreparedDevices]; f != nil && len(f.Metric) > 0 {
		out = append(out, fmt.Sprintf("%s %g", metricname.PreparedDevices, sampleValue(f.Metric[0])))
	}
	if f := fams[metricname.KubeletRegistered]; f != nil && len(f.Metric) > 0 {
		out = append(out, fmt.Sprintf("%s %g", metricname.KubeletRegistered, sampleValue(f.Metric[0])))
	}
	if f := fams[metricname.PrepareDuration]; f != nil && len(f.Metric) > 0 {
		out = append(out, fmt.Sprintf("%s_count %d", metricname.PrepareDuration, f.Metric[0].GetHistogram().GetSampleCount()))
	}
	if f := fams[metricname.Errors]; f != nil {
		var lines []string
		for _, m := range f.Metric {
			op := ""
			for _, l := range m.Label {
				if l.GetName() == metricname.LabelOperation {
					op = l.GetValue()
				}
			}
			lines = append(lines, fmt.Sprintf("%s{%s=%q} %g", metricname.Errors, metricname.LabelOperation, op, sampleValue(m)))
		}
		sort.Strings(lines)
		out = append(out, lines...)
	}
	return out
}

// prepareErrors is the plugin's count of failed prepares on a node (-1
// when unknown).
func prepareErrors(text string) float64 {
	f := parseMetrics(text)[metricname.Errors]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == metricname.LabelOperation && l.GetValue() == metricname.OperationPrepare {
				return sampleValue(m)
			}
		}
	}
	return 0
}

// registered tells from the kubelet's plugin manager metric whether one of
// the driver's registration sockets is in the kubelet's actual state:
// <driver>-reg.sock, or the per-pod name the kubelet plugin helper gives it
// for rolling updates. "unknown" when the kubelet's metrics could not be
// read.
func registered(kubeletMetrics, driver string, podUIDs []types.UID) string {
	if strings.TrimSpace(kubeletMetrics) == "" {
		return "no" // the kubelet answered but lists no plugin at all
	}
	fams := parseMetrics(kubeletMetrics)
	if fams == nil {
		return "unknown"
	}
	f := fams[metricKubeletPlugins]
	if f == nil {
		return "no"
	}
	for _, m := range f.Metric {
		socket, state := "", ""
		for _, l := range m.Label {
			switch l.GetName() {
			case "socket_path":
				socket = l.GetValue()
			case "state":
				state = l.GetValue()
			}
		}
		if state != "actual_state_of_world" || sampleValue(m) <= 0 {
			continue
		}
		_, base := path.Split(socket)
		if base == driver+"-reg.sock" {
			return "yes"
		}
		for _, uid := range podUIDs {
			if slices.Contains(rollingUpdateRegistrarSockets(driver, uid), base) {
				return "yes"
			}
		}
	}
	return "no"
}

// FilterMetrics keeps the lines of a Prometheus text exposition whose
// metric name starts with one of prefixes (with their HELP and TYPE), so
// a snapshot stays small.
func FilterMetrics(text string, prefixes ...string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				b.WriteString(line)
				b.WriteByte('\n')
				break
			}
		}
	}
	return b.String()
}

// sampleValue reads a gauge, counter or untyped sample.
func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// rollingUpdateRegistrarSockets are the registration socket names
// k8s.io/dynamic-resource-allocation/kubeletplugin's
// RollingUpdateRegistrarSocketFile may give a plugin pod during a rolling
// update (it takes the first whose path fits a socket address). Named here,
// not imported: that package is the kubelet plugin's gRPC side, which the
// operator's binary (cmd/kubectl-gpu) must not link.
// TestRollingUpdateRegistrarSockets keeps them equal to the library's.
func rollingUpdateRegistrarSockets(driver string, podUID types.UID) []string {
	uid := string(podUID)
	uidHash := sha256.Sum256([]byte(uid))
	driverUIDHash := sha256.Sum256([]byte(driver + "\x00" + uid))
	return []string{
		driver + "-" + uid + "-reg.sock",
		driver + "-" + base64.RawURLEncoding.EncodeToString(uidHash[:8]) + "-reg.sock",
		"dra-" + base64.RawURLEncoding.EncodeToString(driverUIDHash[:16]) + "-reg.sock",
	}
}
