// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/podfit"
)

// PluginSelector selects the chart's kubelet-plugin pods and DaemonSets
// (deployments/helm/gpu-dra-driver/templates/_helpers.tpl).
const PluginSelector = "app.kubernetes.io/name=gpu-dra-driver,app.kubernetes.io/component=kubelet-plugin"

// defaultMetricsPort is the chart's kubeletPlugin.metricsPort.
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
	s := &Snapshot{DriverName: driverName, ServerVersion: ServerVersion(cs), PluginMetrics: map[string]string{}, KubeletMetrics: map[string]string{}}
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
		} else if bound, err := podfit.ListBoundPods(ctx, cs); err == nil {
			// A Pending pod: the requests of the pods bound to each node
			// take its room (NodeResourcesFit).
			s.Pods = append(s.Pods, bound...)
		} else {
			unreadable("pods bound to nodes (their requests take each node's CPU, memory and pod slots)", err)
		}
	case "claim":
		s.events(ctx, cs, "ResourceClaim", t.Namespace, t.Name)
	case "node":
		nodes[t.Name] = true
		s.events(ctx, cs, "Node", "", t.Name)
	}
	for node := range nodes {
		s.Unreadable = append(s.Unreadable, MetricsNotRead(node))
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

// MetricsNotRead is what a live diagnosis says in place of the plugin's
// and the kubelet's metrics. Both are reachable only through the API
// server's proxy (pods/proxy to the plugin's port, nodes/proxy to the
// kubelet, which is the kubelet's whole API), and the CLI asks for neither
// permission. Registration then shows as unknown unless the kubelet's own
// events tell; prepare errors still come from the pod's events.
func MetricsNotRead(node string) string {
	return fmt.Sprintf("metrics of node %s (the plugin's gpu_dra_* and the kubelet's plugin registration): not read, since they are reachable only through the API server's pods/proxy and nodes/proxy, which this tool does not use; read them where Prometheus scrapes them, or on the node: curl http://<plugin pod IP>:%d/metrics (the chart's kubeletPlugin.metricsPort)", node, defaultMetricsPort)
}

// ServerVersion is the API server's gitVersion, "" when it cannot be read
// (the answers do not depend on it; it only decides a warning).
func ServerVersion(cs kubernetes.Interface) string {
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v == nil {
		return ""
	}
	return v.GitVersion
}
