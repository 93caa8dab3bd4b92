// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

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

// waitPositive waits until query q has a series with a value above zero.
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
