// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// PluginSelector selects the chart's kubelet-plugin pods and DaemonSets
// (deployments/helm/gpu-dra-driver/templates/_helpers.tpl).
const PluginSelector = "app.kubernetes.io/name=gpu-dra-driver,app.kubernetes.io/component=kubelet-plugin"

const defaultMetricsPort = 9402

// Target is what to diagnose: Kind "pod", "claim" or "node".
type Target struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// Gather reads the cluster state a diagnosis of t needs. It fails only when
// nothing useful can be read; what it could not read goes to Unreadable.
func Gather(ctx context.Context, cs kubernetes.Interface, driverName string, t Target) (*Snapshot, error) {
	s := &Snapshot{DriverName: driverName, PluginMetrics: map[string]string{}, KubeletMetrics: map[string]string{}}
	unreadable := func(what string, err error) { s.Unreadable = append(s.Unreadable, fmt.Sprintf("%s: %v", what, err)) }
	all := metav1.ListOptions{}

	slices, err := cs.ResourceV1().ResourceSlices().List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices (is this a DRA-enabled cluster, and may you read cluster-scoped objects?): %w", err)
	}
	s.Slices = slices.Items
	if classes, err := cs.ResourceV1().DeviceClasses().List(ctx, all); err == nil {
		s.DeviceClasses = classes.Items
	} else {
		unreadable("DeviceClasses", err)
	}
	// All claims: the devices other claims hold are what the scheduler
	// cannot give this one.
	if claims, err := cs.ResourceV1().ResourceClaims("").List(ctx, all); err == nil {
		s.Claims = claims.Items
	} else {
		unreadable("ResourceClaims", err)
	}
	if nodes, err := cs.CoreV1().Nodes().List(ctx, all); err == nil {
		s.Nodes = nodes.Items
	} else {
		unreadable("Nodes", err)
	}
	if pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: PluginSelector}); err == nil {
		s.PluginPods = pods.Items
	} else {
		unreadable("plugin pods", err)
	}
	if dss, err := cs.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gpu-dra-driver"}); err == nil {
		s.PluginDaemonSets = dss.Items
	} else {
		unreadable("plugin DaemonSets", err)
	}

	nodes := map[string]bool{}
	switch t.Kind {
	case "pod":
		pod, err := cs.CoreV1().Pods(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			return s, fmt.Errorf("get pod %s/%s: %w", t.Namespace, t.Name, err)
		}
		s.Pods = append(s.Pods, *pod)
		s.events(ctx, cs, "Pod", t.Namespace, t.Name)
		for _, pc := range pod.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName != nil {
				if tmpl, err := cs.ResourceV1().ResourceClaimTemplates(t.Namespace).Get(ctx, *pc.ResourceClaimTemplateName, metav1.GetOptions{}); err == nil {
					s.ClaimTemplates = append(s.ClaimTemplates, *tmpl)
				}
			}
		}
		if pod.Spec.NodeName != "" {
			nodes[pod.Spec.NodeName] = true
		}
	case "claim":
		s.events(ctx, cs, "ResourceClaim", t.Namespace, t.Name)
	case "node":
		nodes[t.Name] = true
		s.events(ctx, cs, "Node", "", t.Name)
	}
	for node := range nodes {
		s.metrics(ctx, cs, node)
	}
	return s, nil
}

func (s *Snapshot) events(ctx context.Context, cs kubernetes.Interface, kind, namespace, name string) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}
	list, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		s.Unreadable = append(s.Unreadable, fmt.Sprintf("events of %s %s: %v", kind, name, err))
		return
	}
	s.Events = append(s.Events, list.Items...)
}

// metrics reads the plugin's /metrics through the API server's pod proxy
// and the kubelet's plugin registrations through its node proxy.
func (s *Snapshot) metrics(ctx context.Context, cs kubernetes.Interface, node string) {
	for _, p := range s.pluginPodsOn(node) {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		port := strconv.Itoa(metricsPort(p))
		raw, err := cs.CoreV1().Pods(p.Namespace).ProxyGet("http", p.Name, port, "/metrics", nil).DoRaw(ctx)
		if err != nil {
			s.Unreadable = append(s.Unreadable, fmt.Sprintf("metrics of plugin pod %s/%s: %v", p.Namespace, p.Name, err))
			continue
		}
		s.PluginMetrics[node] = FilterMetrics(string(raw), metricname.Prefix)
		break
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		// Only worth saying when the plugin could not tell either.
		if !strings.Contains(s.PluginMetrics[node], metricname.KubeletRegistered) {
			s.Unreadable = append(s.Unreadable, fmt.Sprintf("kubelet metrics of node %s (plugin registration): %v", node, err))
		}
		return
	}
	s.KubeletMetrics[node] = FilterMetrics(string(raw), metricKubeletPlugins)
}

// metricsPort reads the plugin's --http-endpoint port.
func metricsPort(p *corev1.Pod) int {
	for _, c := range p.Spec.Containers {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--http-endpoint="); ok {
				if i := strings.LastIndex(v, ":"); i >= 0 {
					if n, err := strconv.Atoi(v[i+1:]); err == nil {
						return n
					}
				}
			}
		}
	}
	return defaultMetricsPort
}
