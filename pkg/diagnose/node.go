// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// pluginEventSource is the component the plugin reports Node events as
// (pkg/driver/events.go).
const pluginEventSource = "gpu-kubelet-plugin"

// DiagnoseNode reports the driver on one node: its plugin pod and
// registration, the pool it published, devices and the claims on them.
func DiagnoseNode(s *clusterview.Snapshot, name string) *Report {
	r := &Report{Target: "node " + name, Unreadable: s.Unreadable}
	n := s.Node(name)
	if n == nil {
		var names []string
		for _, x := range s.Nodes {
			names = append(names, x.Name)
		}
		r.Status, r.Verdict = Blocked, fmt.Sprintf("node %s does not exist (nodes: %s)", name, orNone(strings.Join(names, ", ")))
		return r
	}
	nr := &NodeReport{Name: name, Ready: nodeReady(n)}
	r.Node = nr
	for _, p := range s.PluginPodsOn(name) {
		nr.PluginPods = append(nr.PluginPods, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, podState(p)))
		if prof := simulatedProfile(p); prof != "" {
			nr.Simulated = prof
		}
	}
	nr.Registered = registeredOn(s, name)
	nd := clusterview.OnNode(s, name)
	nodePools := nd.Pools
	for _, p := range nodePools {
		state := "complete"
		if !p.Complete {
			state = "INCOMPLETE: the scheduler uses none of its devices until all slices are published"
		}
		nr.Pools = append(nr.Pools, fmt.Sprintf("pool %s: generation %d, %d of %d slices, %s", p.Name, p.Generation, p.Seen, p.Announced, state))
	}
	nr.Devices, nr.ByType, nr.Claims = nd.Devices, nd.ByType, nd.Claims
	nr.Metrics = pluginMetrics(s.PluginMetrics[name])
	for _, e := range s.EventsFor("Node", "", name) {
		// The plugin's own reports (PluginStateRecovery), not the kubelet's.
		if e.Type == corev1.EventTypeWarning && e.Source.Component == pluginEventSource {
			nr.Events = append(nr.Events, fmt.Sprintf("%s (x%d): %s", e.Reason, max(e.Count, 1), e.Message))
		}
	}
	plugin, state := pluginOn(s, name)
	incomplete := false
	for _, p := range nodePools {
		incomplete = incomplete || !p.Complete
	}
	r.Status = Blocked
	switch {
	case plugin == nil:
		r.Verdict = noPluginReason(s, name)
	case !strings.HasPrefix(state, "Running, ready"):
		r.Verdict = fmt.Sprintf("the driver's plugin pod %s/%s on node %s is %s; see kubectl logs -n %s %s", plugin.Namespace, plugin.Name, name, state, plugin.Namespace, plugin.Name)
	case nr.Registered == "no":
		r.Verdict = fmt.Sprintf("plugin pod %s/%s runs but the kubelet on %s has not registered driver %s: pods with claims cannot be prepared there; check the chart's kubeletDir against the kubelet's --root-dir", plugin.Namespace, plugin.Name, name, s.DriverName)
	case len(nodePools) == 0:
		r.Verdict = fmt.Sprintf("plugin pod %s/%s runs but node %s publishes no ResourceSlices for %s; see kubectl logs -n %s %s", plugin.Namespace, plugin.Name, name, s.DriverName, plugin.Namespace, plugin.Name)
	case incomplete:
		r.Verdict = fmt.Sprintf("the pool of node %s is incomplete (%s), so the scheduler allocates none of its devices; it completes when the plugin has written all slices (see its logs)", name, strings.Join(nr.Pools, "; "))
	case nr.Devices.Total == 0:
		r.Verdict = fmt.Sprintf("node %s publishes a pool without devices: the plugin found no usable GPU (see kubectl logs -n %s %s and %s)", name, plugin.Namespace, plugin.Name, metricname.DiscoveryFailedGPUs)
	default:
		r.Status = OK
		gpus := 0
		for _, t := range nr.ByType {
			if t.Type == deviceattr.TypeGPU {
				gpus = t.Total
			}
		}
		r.Verdict = fmt.Sprintf("node %s serves %d GPUs (%d devices) through plugin %s/%s (registered: %s); %d allocated to %d %s, %d free",
			name, gpus, nr.Devices.Total, plugin.Namespace, plugin.Name, nr.Registered, nr.Devices.Allocated, len(nr.Claims), plural(len(nr.Claims), "claim", "claims"), nr.Devices.Free)
		if nr.Simulated != "" {
			r.Verdict += "; simulated GPUs (" + nr.Simulated + ")"
		}
	}
	return r
}

func nodeReady(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return string(c.Status)
		}
	}
	return "Unknown"
}

// simulatedProfile reads --simulate or SIMULATE_PROFILE from a plugin pod.
func simulatedProfile(p *corev1.Pod) string {
	for _, ctr := range p.Spec.Containers {
		for _, a := range ctr.Args {
			if v, ok := strings.CutPrefix(a, "--simulate="); ok && v != "" {
				return v
			}
		}
		for _, e := range ctr.Env {
			if e.Name == "SIMULATE_PROFILE" && e.Value != "" {
				return e.Value
			}
		}
	}
	return ""
}
