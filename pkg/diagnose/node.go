// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// pluginEventSource is the component the plugin reports Node events as
// (pkg/driver/events.go).
const pluginEventSource = "gpu-kubelet-plugin"

// DiagnoseNode reports the driver on one node: its plugin pod and
// registration, the pool it published, devices and the claims on them.
func DiagnoseNode(s *Snapshot, name string) *Report {
	r := &Report{Target: "node " + name, Unreadable: s.Unreadable}
	c := published(s, "")
	n := s.node(name)
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
	for _, p := range s.pluginPodsOn(name) {
		nr.PluginPods = append(nr.PluginPods, fmt.Sprintf("%s/%s: %s", p.Namespace, p.Name, podState(p)))
		if prof := simulatedProfile(p); prof != "" {
			nr.Simulated = prof
		}
	}
	nr.Registered = c.registeredOn(name)
	var nodePools []*pool
	for _, p := range c.pools {
		if p.Node == name && p.Driver == s.DriverName {
			nodePools = append(nodePools, p)
			state := "complete"
			if !p.Complete {
				state = "INCOMPLETE: the scheduler uses none of its devices until all slices are published"
			}
			nr.Pools = append(nr.Pools, fmt.Sprintf("pool %s: generation %d, %d of %d slices, %s", p.Name, p.Generation, p.Seen, p.Announced, state))
		}
	}
	c.countNodeDevices(nr)
	c.nodeClaims(nr)
	nr.Metrics = pluginMetrics(s.PluginMetrics[name])
	for _, e := range s.eventsFor("Node", "", name) {
		// The plugin's own reports (PluginStateRecovery), not the kubelet's.
		if e.Type == corev1.EventTypeWarning && e.Source.Component == pluginEventSource {
			nr.Events = append(nr.Events, fmt.Sprintf("%s (x%d): %s", e.Reason, max(e.Count, 1), e.Message))
		}
	}
	plugin, state := c.pluginOn(name)
	incomplete := false
	for _, p := range nodePools {
		incomplete = incomplete || !p.Complete
	}
	r.Status = Blocked
	switch {
	case plugin == nil:
		r.Verdict = c.noPluginReason(name)
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

// countNodeDevices sorts the node's devices as a request with no selector
// would see them.
func (c *cluster) countNodeDevices(nr *NodeReport) {
	byType := map[string]*DeviceCount{}
	for _, d := range c.devices {
		if d.Node != nr.Name || d.Driver != c.snap.DriverName {
			continue
		}
		t := d.typ()
		if byType[t] == nil {
			byType[t] = &DeviceCount{Type: t}
		}
		counts := []*DeviceCounts{&byType[t].DeviceCounts}
		if t != deviceattr.TypeMonitor {
			// Monitor devices (one per GPU, admin access only) are
			// views of GPUs counted already: only their own row has them.
			counts = append(counts, &nr.Devices)
		}
		for _, dc := range counts {
			dc.Total++
			switch st := c.state(d, &resourceapi.ExactDeviceRequest{}); {
			case st == stateTainted:
				dc.Tainted++
			case ptr.Deref(d.Dev.AllowMultipleAllocations, false):
				// A shared GPU is free while it has room for the
				// smallest share its capacity policy allows.
				if c.sharedFull(d) {
					dc.Allocated++
				} else {
					dc.Free++
				}
			case st == stateAllocated:
				dc.Allocated++
			case st == stateCounters:
				dc.CounterBlocked++
			default:
				dc.Free++
			}
		}
	}
	for _, t := range byType {
		nr.ByType = append(nr.ByType, *t)
	}
	sort.Slice(nr.ByType, func(i, j int) bool { return nr.ByType[i].Type < nr.ByType[j].Type })
}

// nodeClaims lists the claims allocated on the node; a claim whose device
// status the plugin wrote has been prepared.
func (c *cluster) nodeClaims(nr *NodeReport) {
	for i := range c.snap.Claims {
		cl := &c.snap.Claims[i]
		a := cl.Status.Allocation
		if a == nil {
			continue
		}
		var devs []string
		for _, r := range a.Devices.Results {
			if d := c.byKey[r.Driver+"/"+r.Pool+"/"+r.Device]; r.Driver == c.snap.DriverName && (d != nil && d.Node == nr.Name || d == nil && allocationNode(a) == nr.Name) {
				devs = append(devs, r.Device)
			}
		}
		if len(devs) == 0 {
			continue
		}
		nc := NodeClaim{Claim: cl.Namespace + "/" + cl.Name, Devices: devs}
		for _, ref := range cl.Status.ReservedFor {
			if ref.Resource == "pods" {
				nc.Pods = append(nc.Pods, cl.Namespace+"/"+ref.Name)
			}
		}
		for _, st := range cl.Status.Devices {
			if st.Driver == c.snap.DriverName {
				nc.Prepared = true
			}
		}
		nr.Claims = append(nr.Claims, nc)
	}
	sort.Slice(nr.Claims, func(i, j int) bool { return nr.Claims[i].Claim < nr.Claims[j].Claim })
}
