// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const promNS = "gpu-prom"

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
