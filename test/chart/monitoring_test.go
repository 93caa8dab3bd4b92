// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

var allMonitoring = []string{"metrics.podMonitor.enabled=true", "metrics.grafanaDashboard.enabled=true", "metrics.prometheusRules.enabled=true"}

// docsOfKind returns the rendered documents of one kind, as generic maps.
func docsOfKind(t *testing.T, kind string, set ...string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, doc := range strings.Split(string(helmTemplate(t, set...)), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if m["kind"] == kind {
			out = append(out, m)
		}
	}
	return out
}

// dashboardConfigMaps are the rendered ConfigMaps that Grafana's sidecar loads.
func dashboardConfigMaps(t *testing.T, set ...string) []corev1.ConfigMap {
	t.Helper()
	var out []corev1.ConfigMap
	for _, m := range docsOfKind(t, "ConfigMap", set...) {
		raw, _ := json.Marshal(m)
		var cm corev1.ConfigMap
		if err := json.Unmarshal(raw, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels["grafana_dashboard"] == "1" {
			out = append(out, cm)
		}
	}
	return out
}

// TestChartMonitoringOffByDefault: a default install creates no object of
// the Prometheus Operator (its CRDs may be missing) and no dashboard.
func TestChartMonitoringOffByDefault(t *testing.T) {
	for _, kind := range []string{"PodMonitor", "PrometheusRule"} {
		if got := docsOfKind(t, kind); len(got) != 0 {
			t.Errorf("default install renders a %s", kind)
		}
	}
	if got := dashboardConfigMaps(t); len(got) != 0 {
		t.Errorf("default install renders a dashboard ConfigMap")
	}
}

// TestChartPodMonitorScrapesThePlugin: the PodMonitor selects the plugin's
// pods, in its namespace, keeps the plugin container, scrapes the pod's IP
// on the metrics port (the container declares no port: on the host network
// it would be a hostPort that keeps a rolling update's surge pod from
// being scheduled), and labels series with the node (what the dashboard
// and rules group by). test/e2e TestPrometheus scrapes with these
// relabelings for real.
func TestChartPodMonitorScrapesThePlugin(t *testing.T) {
	set := append(slices.Clone(allMonitoring), "kubeletPlugin.metricsPort=9555", "metrics.podMonitor.labels.release=kps")
	pms := docsOfKind(t, "PodMonitor", set...)
	if len(pms) != 1 {
		t.Fatalf("%d PodMonitors", len(pms))
	}
	raw, _ := json.Marshal(pms[0])
	type relabel struct {
		SourceLabels                            []string
		Regex, Replacement, TargetLabel, Action string
	}
	var pm struct {
		Metadata struct {
			Namespace string
			Labels    map[string]string
		}
		Spec struct {
			Selector            struct{ MatchLabels map[string]string }
			NamespaceSelector   struct{ MatchNames []string }
			PodMetricsEndpoints []struct {
				Port, Path, Interval string
				Relabelings          []relabel
			}
		}
	}
	if err := json.Unmarshal(raw, &pm); err != nil {
		t.Fatal(err)
	}
	ds := render(t, set...)
	for k, v := range pm.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("PodMonitor selects %s=%s, the plugin's pods have %q", k, v, ds.Spec.Template.Labels[k])
		}
	}
	if len(pm.Spec.Selector.MatchLabels) == 0 || pm.Metadata.Labels["release"] != "kps" {
		t.Errorf("selector %v, labels %v", pm.Spec.Selector.MatchLabels, pm.Metadata.Labels)
	}
	if !slices.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{"gpu-dra-driver"}) {
		t.Errorf("namespaces %v", pm.Spec.NamespaceSelector.MatchNames)
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("endpoints %+v", pm.Spec.PodMetricsEndpoints)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port != "" || ep.Path != "/metrics" || ep.Interval != "30s" {
		t.Errorf("endpoint %+v", ep)
	}
	if v, _ := flag(plugin(t, ds), "--http-endpoint"); v != "[$(POD_IP)]:9555" {
		t.Errorf("plugin serves metrics on %q", v)
	}
	for _, hostNetwork := range []string{"true", "false"} {
		if ports := plugin(t, render(t, append(set, "kubeletPlugin.hostNetwork="+hostNetwork)...)).Ports; len(ports) != 0 {
			t.Errorf("hostNetwork %s: plugin container declares ports %+v", hostNetwork, ports)
		}
	}
	want := []relabel{
		{SourceLabels: []string{"__meta_kubernetes_pod_container_name"}, Regex: "plugin", Action: "keep"},
		{SourceLabels: []string{"__meta_kubernetes_pod_ip"}, Regex: "([0-9.]+)", Replacement: "${1}:9555", TargetLabel: "__address__"},
		{SourceLabels: []string{"__meta_kubernetes_pod_ip"}, Regex: "(.*:.*)", Replacement: "[${1}]:9555", TargetLabel: "__address__"},
		{SourceLabels: []string{"__meta_kubernetes_pod_node_name"}, TargetLabel: "node"},
	}
	if !reflect.DeepEqual(ep.Relabelings, want) {
		t.Errorf("relabelings %+v, want %+v", ep.Relabelings, want)
	}
}

var metricRef = regexp.MustCompile(`\b` + metricname.Prefix + `[a-z0-9_]+`)

// unknownMetrics lists the gpu_dra_ names a PromQL expression uses that
// the plugin does not export (pkg/metrics/metricname is the one list; a
// histogram's series carry _bucket, _sum and _count).
func unknownMetrics(expr string) []string {
	var out []string
	for _, name := range metricRef.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && (b == metricname.PrepareDuration || b == metricname.UnprepareDuration) {
				base = b
			}
		}
		if !slices.Contains(metricname.All, base) {
			out = append(out, name)
		}
	}
	return out
}

// dashboard is the part of the Grafana dashboard JSON the tests read.
type dashboard struct {
	Title  string
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

// TestChartDashboard: the ConfigMap carries the chart's dashboard as valid
// JSON, with the panels the issue asks for, and every query names only
// metrics the plugin exports.
func TestChartDashboard(t *testing.T) {
	cms := dashboardConfigMaps(t, append(slices.Clone(allMonitoring), "metrics.grafanaDashboard.namespace=monitoring")...)
	if len(cms) != 1 || cms[0].Namespace != "monitoring" {
		t.Fatalf("dashboard ConfigMaps %+v, want one in namespace monitoring", cms)
	}
	data := cms[0].Data["gpu-dra-driver.json"]
	file, err := os.ReadFile(chartDir + "/files/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(data) != strings.TrimSpace(string(file)) {
		t.Error("the ConfigMap's dashboard differs from files/grafana-dashboard.json")
	}
	var d dashboard
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	titles := map[string][]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			titles[p.Title] = append(titles[p.Title], q.Expr)
			if bad := unknownMetrics(q.Expr); len(bad) > 0 || !metricRef.MatchString(q.Expr) {
				t.Errorf("panel %q query %q uses %v, not exported by the plugin (pkg/metrics/metricname)", p.Title, q.Expr, bad)
			}
		}
	}
	for _, want := range []string{"GPUs by state per node", "MIG slices in use", "Prepare latency", "Unprepare latency", "Errors", "Unhealthy devices", "XID events", "Unrestored claims"} {
		if _, ok := titles[want]; !ok {
			t.Errorf("no panel %q", want)
		}
	}
}

// TestChartPrometheusRules: the PrometheusRule's spec is the plain rules
// file promtool tests, with the four alerts, over exported metrics only.
func TestChartPrometheusRules(t *testing.T) {
	prs := docsOfKind(t, "PrometheusRule", allMonitoring...)
	if len(prs) != 1 {
		t.Fatalf("%d PrometheusRules", len(prs))
	}
	raw, err := os.ReadFile(chartDir + "/files/prometheus-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(prs[0]["spec"], file) {
		t.Errorf("PrometheusRule spec %v differs from files/prometheus-rules.yaml", prs[0]["spec"])
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if bad := unknownMetrics(r.Expr); len(bad) > 0 || !metricRef.MatchString(r.Expr) {
				t.Errorf("alert %s uses %v, not exported by the plugin", r.Alert, bad)
			}
		}
	}
	slices.Sort(alerts)
	if want := []string{"GPUDRAClaimsNotRestored", "GPUDRADeviceUnhealthy", "GPUDRAPluginNotRegistered", "GPUDRAPrepareErrors"}; !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}
