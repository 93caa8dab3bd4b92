// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"encoding/json"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestChartMetricsListenOnThePodIPOnly: /metrics, /healthz and /readyz
// answer without authentication, so by default the plugin listens on the
// pod's own IP only (with hostNetwork, the node's primary IP rather than
// every interface of the node), where the kubelet probes it and the
// PodMonitor scrapes it. The address comes from the downward API through
// an environment variable that Kubernetes expands in the argument.
func TestChartMetricsListenOnThePodIPOnly(t *testing.T) {
	for _, hostNetwork := range []string{"false", "true"} {
		ds := render(t, "kubeletPlugin.hostNetwork="+hostNetwork, "kubeletPlugin.metricsPort=9555")
		c := plugin(t, ds)
		if v, _ := flag(c, "--http-endpoint"); v != "[$(POD_IP)]:9555" {
			t.Errorf("hostNetwork %s: --http-endpoint=%q, want the pod IP", hostNetwork, v)
		}
		var podIP *corev1.EnvVar
		for i := range c.Env {
			if c.Env[i].Name == "POD_IP" {
				podIP = &c.Env[i]
			}
		}
		if podIP == nil || podIP.ValueFrom == nil || podIP.ValueFrom.FieldRef == nil || podIP.ValueFrom.FieldRef.FieldPath != "status.podIP" {
			t.Errorf("hostNetwork %s: POD_IP is %+v, want the downward API's status.podIP", hostNetwork, podIP)
		}
		// Kubernetes expands $(VAR) in arguments only for variables the
		// container declares; otherwise the text stays as it is.
		declared := map[string]bool{}
		for _, e := range c.Env {
			declared[e.Name] = true
		}
		for _, a := range c.Args {
			for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(a, -1) {
				if !declared[m[1]] {
					t.Errorf("argument %q names $(%s), which the container does not declare", a, m[1])
				}
			}
		}
		for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.IntValue() != 9555 || p.HTTPGet.Host != "" {
				t.Errorf("hostNetwork %s: %s probe %+v, want the pod IP (no host) on the metrics port", hostNetwork, name, p)
			}
		}
	}
	for addr, want := range map[string]string{"10.0.0.5": "10.0.0.5:9402", "fd00::5": "[fd00::5]:9402", "0.0.0.0": "0.0.0.0:9402", "": ":9402"} {
		c := plugin(t, render(t, "kubeletPlugin.metricsBindAddress="+addr))
		if v, _ := flag(c, "--http-endpoint"); v != want {
			t.Errorf("metricsBindAddress %q: --http-endpoint=%q, want %q", addr, v, want)
		}
	}
}

func networkPolicies(t *testing.T, set ...string) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, m := range docsOfKind(t, "NetworkPolicy", set...) {
		raw, _ := json.Marshal(m)
		var np networkingv1.NetworkPolicy
		if err := json.Unmarshal(raw, &np); err != nil {
			t.Fatal(err)
		}
		out = append(out, np)
	}
	return out
}

// TestChartMetricsNetworkPolicy: metrics.networkPolicy admits to the
// plugin pods only the scraper its selectors name, only on the metrics
// port; nothing else reaches them (the plugin takes no other connection:
// the kubelet calls it through unix sockets, and its probes come from the
// node, which NetworkPolicies always admit). Off by default.
func TestChartMetricsNetworkPolicy(t *testing.T) {
	if nps := networkPolicies(t); len(nps) != 0 {
		t.Errorf("default install renders %d NetworkPolicies", len(nps))
	}
	set := []string{"metrics.networkPolicy.enabled=true", "kubeletPlugin.metricsPort=9555",
		"metrics.networkPolicy.namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability",
		"metrics.networkPolicy.podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus"}
	nps := networkPolicies(t, set...)
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies", len(nps))
	}
	np := nps[0]
	ds := render(t, set...)
	if np.Namespace != "gpu-dra-driver" {
		t.Errorf("namespace %q", np.Namespace)
	}
	if !reflect.DeepEqual(np.Spec.PodSelector.MatchLabels, ds.Spec.Selector.MatchLabels) || len(np.Spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("selects %+v, the plugin's pods are %+v", np.Spec.PodSelector, ds.Spec.Selector.MatchLabels)
	}
	if !reflect.DeepEqual(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policy types %v, want Ingress only (the plugin must reach the API server)", np.Spec.PolicyTypes)
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(9555)
	want := []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
		// One peer with both selectors: pods that match podSelector in
		// namespaces that match namespaceSelector.
		From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "observability"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
		}},
	}}
	if !reflect.DeepEqual(np.Spec.Ingress, want) {
		got, _ := json.Marshal(np.Spec.Ingress)
		w, _ := json.Marshal(want)
		t.Errorf("ingress %s, want %s", got, w)
	}

	// A policy that selects no scraper would admit every pod of the
	// cluster ({} selects all) or none; the chart refuses it, and it
	// refuses the policy next to hostNetwork, where it does nothing.
	for _, bad := range [][]string{
		{"metrics.networkPolicy.enabled=true"},
		{"metrics.networkPolicy.enabled=true", "kubeletPlugin.hostNetwork=true", "metrics.networkPolicy.podSelector.matchLabels.app=prometheus"},
	} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2"}
		for _, s := range bad {
			args = append(args, "--set", s)
		}
		out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "metrics.networkPolicy") {
			t.Errorf("--set %v: %v\n%.400s", bad, err, out)
		}
	}
}
