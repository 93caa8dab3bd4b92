// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const promNS = "gpu-prom"

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// promServer is Debian's Prometheus (hack/prometheus.sh) on this host,
// scraping the plugin's /metrics (the plugin runs on the host network,
// hack/cluster/deploy.sh), with the chart's alert rules loaded.
type promServer struct{ base string }

func startPrometheus(t *testing.T, pod corev1.Pod) *promServer {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "prometheus.sh")).Output()
	if err != nil {
		t.Fatalf("hack/prometheus.sh: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir := t.TempDir()
	rules, _ := filepath.Abs(filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver", "files", "prometheus-rules.yaml"))
	// The plugin's pod as Kubernetes pod discovery would describe it,
	// one target per container, relabelled as the chart's PodMonitor says
	// (the Prometheus Operator would generate the same from it): the
	// target address, the container and the node label come from the
	// chart, not from this test. Debian builds Prometheus without
	// Kubernetes discovery, so the test stands in for it with the meta
	// labels (labels starting with __ are read by relabeling, then dropped).
	var targets []any
	for _, c := range pod.Spec.Containers {
		targets = append(targets, map[string]any{
			"targets": []string{"discovered:1"},
			"labels": map[string]string{
				"__meta_kubernetes_namespace":          pod.Namespace,
				"__meta_kubernetes_pod_name":           pod.Name,
				"__meta_kubernetes_pod_ip":             pod.Status.PodIP,
				"__meta_kubernetes_pod_node_name":      pod.Spec.NodeName,
				"__meta_kubernetes_pod_container_name": c.Name,
			},
		})
	}
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{rules},
		"scrape_configs": []any{map[string]any{
			"job_name":        "gpu-dra-driver",
			"static_configs":  targets,
			"relabel_configs": podMonitorRelabelings(t),
		}},
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "prometheus"), "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("prometheus log:\n%s", log)
		}
	})
	p := &promServer{base: "http://" + addr}
	waitFor(t, "Prometheus to scrape the plugin", 60*time.Second, func() (bool, string) {
		s, err := p.query(`up{job="gpu-dra-driver"}`)
		return err == nil && len(s) == 1 && s[0].Value == 1, fmt.Sprint(s, err)
	})
	return p
}

// podMonitorRelabelings renders the chart's PodMonitor and returns its
// relabelings as Prometheus relabel_configs.
func podMonitorRelabelings(t *testing.T) []map[string]any {
	t.Helper()
	out, err := exec.Command("helm", "template", "gpu-dra-driver", filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver"),
		"--namespace", driverNS, "--kube-version", "v1.37.2", "--set", "metrics.podMonitor.enabled=true", "--show-only", "templates/podmonitor.yaml").Output()
	if err != nil {
		stderr := ""
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("helm template the PodMonitor: %v\n%s", err, stderr)
	}
	var pm struct {
		Spec struct {
			PodMetricsEndpoints []struct {
				Path        string
				Relabelings []map[string]any
			}
		}
	}
	if err := yaml.Unmarshal(out, &pm); err != nil || len(pm.Spec.PodMetricsEndpoints) != 1 || pm.Spec.PodMetricsEndpoints[0].Path != "/metrics" {
		t.Fatalf("PodMonitor %+v: %v\n%s", pm, err, out)
	}
	rename := map[string]string{"sourceLabels": "source_labels", "targetLabel": "target_label"}
	var relabel []map[string]any
	for _, r := range pm.Spec.PodMetricsEndpoints[0].Relabelings {
		c := map[string]any{}
		for k, v := range r {
			if n, ok := rename[k]; ok {
				k = n
			}
			c[k] = v
		}
		relabel = append(relabel, c)
	}
	return relabel
}

// query runs an instant query through Prometheus's HTTP API.
func (p *promServer) query(q string) ([]promSample, error) {
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status, Error string
		Data          struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", q, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v", q, r.Value)
		}
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// waitValue waits until query q has a series with a value above zero.
func (p *promServer) waitPositive(t *testing.T, q string) {
	t.Helper()
	waitFor(t, q+" > 0", 90*time.Second, func() (bool, string) {
		s, err := p.query(q)
		for _, x := range s {
			if x.Value > 0 {
				return true, ""
			}
		}
		return false, fmt.Sprint(s, err)
	})
}

// dashboardQueries are the chart's dashboard panels' queries by panel
// title, with the node variable set to every node.
func dashboardQueries(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver", "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, panel := range d.Panels {
		for _, target := range panel.Targets {
			out[panel.Title] = append(out[panel.Title], strings.ReplaceAll(target.Expr, "$node", ".*"))
		}
	}
	return out
}

// byLabel sums the samples by one label's value.
func byLabel(s []promSample, label string) map[string]float64 {
	out := map[string]float64{}
	for _, x := range s {
		out[x.Metric[label]] += x.Value
	}
	return out
}

// TestPrometheus: a real Prometheus scrapes the plugin while pods hold a
// whole GPU, two MIG devices, a time-sliced GPU and a memory share (and a
// pod's prepare fails, and an application XID arrives); every query of the
// chart's dashboard then returns the series it should, and the chart's
// alert rules load and evaluate.
func TestPrometheus(t *testing.T) {
	plugins := pluginPodList(t)
	if len(plugins) != 1 {
		t.Fatalf("%d plugin pods, want 1", len(plugins))
	}
	node := plugins[0].Spec.NodeName
	prom := startPrometheus(t, plugins[0])
	testNamespace(t, promNS)

	pods := []string{"whole", "mig-pair", "time-sliced", "fraction"}
	applyYAML(t, workloadSpecs(promNS, pods...)+"---\n"+claimPod("brief", promNS, "whole", "", map[string]string{"ctr": ""}))
	waitRunningIn(t, promNS, append(pods, "brief")...)
	// An unprepare for the unprepare latency.
	kubectlIn(promNS, "delete", "pod", "brief", "--wait=true")
	// A prepare that fails: the admission webhook would refuse the
	// template at once (TestWebhook), so it is stopped meanwhile.
	restoreOnce := sync.OnceFunc(stopWebhook(t))
	t.Cleanup(restoreOnce) // also when a wait below fails
	applyYAML(t, badConfigTemplate(promNS)+"---\n"+claimPod("bad-config", promNS, "bad-config", "", map[string]string{"ctr": ""}))
	// An application XID: counted, changes no device's health.
	_, uuid, _ := gpuOfIn(t, promNS, "whole", "ctr")
	injectFault(t, uuid, "13")
	t.Cleanup(func() { injectFault(t, uuid, "") })

	prom.waitPositive(t, `gpu_dra_unprepare_duration_seconds_count`)
	prom.waitPositive(t, `gpu_dra_errors_total{operation="prepare"}`)
	restoreOnce()
	prom.waitPositive(t, `gpu_dra_xid_events_total{xid="13"}`)
	prom.waitPositive(t, `gpu_dra_gpu_prepared_claims{mode="fraction"}`)

	queries := dashboardQueries(t)
	results := map[string][][]promSample{}
	for title, qs := range queries {
		for _, q := range qs {
			s, err := prom.query(q)
			if err != nil {
				t.Errorf("panel %q: %v", title, err)
				continue
			}
			if len(s) == 0 {
				t.Errorf("panel %q: query %s returned no series", title, q)
			}
			for _, x := range s {
				if x.Metric["node"] != node {
					t.Errorf("panel %q: series %v lacks node %s", title, x.Metric, node)
				}
			}
			t.Logf("panel %q: %s -> %s", title, q, describe(s))
			results[title] = append(results[title], s)
		}
	}
	first := func(title string) []promSample {
		if r := results[title]; len(r) > 0 {
			return r[0]
		}
		return nil
	}
	states := byLabel(first("GPUs by state per node"), "state")
	var gpus float64
	for _, v := range states {
		gpus += v
	}
	if gpus != 8 || states["whole"] < 1 || states["mig"] < 1 || states["shared"] < 1 || states["fraction"] < 1 {
		t.Errorf("GPUs by state %v: want 8 GPUs, at least one whole, mig, shared and fraction", states)
	}
	modes := byLabel(first("Prepared claims by mode"), "mode")
	if modes["whole"] < 1 || modes["mig"] < 1 || modes["time-slicing"] < 1 || modes["fraction"] < 1 {
		t.Errorf("claims by mode %v", modes)
	}
	if inUse := byLabel(first("MIG slices in use"), "gpu"); !hasValue(inUse, 5) {
		t.Errorf("MIG slices in use %v: want a GPU with 5 (1g.10gb + 3g.40gb)", inUse)
	}
	if m := first("GPU memory allocated"); len(m) != 1 || m[0].Value <= 0 || m[0].Value >= 1 {
		t.Errorf("memory allocated %v: want a share between 0 and 1", m)
	}
	for _, title := range []string{"Prepare latency", "Unprepare latency"} {
		for _, s := range results[title] {
			if len(s) != 1 || math.IsNaN(s[0].Value) || s[0].Value <= 0 {
				t.Errorf("%s %v: want a duration", title, s)
			}
		}
	}
	if e := byLabel(first("Errors"), "operation"); e["prepare"] <= 0 {
		t.Errorf("errors %v: want prepare errors", e)
	}
	if x := byLabel(first("XID events"), "xid"); x["13"] <= 0 {
		t.Errorf("XID events %v: want XID 13", x)
	}
	for title, want := range map[string]float64{"Unhealthy devices": 0, "Unrestored claims": 0, "Plugin registered": 1} {
		if s := first(title); len(s) != 1 || s[0].Value != want {
			t.Errorf("%s %v, want %v", title, s, want)
		}
	}
	checkRulesLoaded(t, prom)
}

func hasValue(m map[string]float64, v float64) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

func describe(s []promSample) string {
	parts := make([]string, 0, len(s))
	for _, x := range s {
		var labels []string
		for _, k := range []string{"state", "mode", "gpu", "operation", "xid"} {
			if v, ok := x.Metric[k]; ok {
				labels = append(labels, k+"="+v)
			}
		}
		parts = append(parts, fmt.Sprintf("{%s} %g", strings.Join(labels, ","), x.Value))
	}
	return strings.Join(parts, " ")
}

// checkRulesLoaded: the chart's four alert rules evaluate without error
// against the plugin's real series; the prepare errors alert is pending
// and none of the others is.
func checkRulesLoaded(t *testing.T, prom *promServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, prom.base+"/api/v1/rules?type=alert", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct{ Name, Health, State, LastError string }
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			n++
			t.Logf("alert %s: health %s, state %s", r.Name, r.Health, r.State)
			if r.Health == "err" {
				t.Errorf("alert %s: %s", r.Name, r.LastError)
			}
			switch {
			case r.Name == "GPUDRAPrepareErrors" && r.State == "inactive":
				// The failed prepare above makes it pending (its for: is
				// 10m): the rule sees the plugin's real error series.
				t.Errorf("alert %s is inactive after a failed prepare", r.Name)
			case r.Name != "GPUDRAPrepareErrors" && r.State != "inactive":
				t.Errorf("alert %s is %s on a healthy cluster", r.Name, r.State)
			}
		}
	}
	if n != 4 {
		t.Errorf("%d alert rules loaded, want 4", n)
	}
}
