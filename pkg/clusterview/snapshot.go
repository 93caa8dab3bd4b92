// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clusterview is the operator side's view of a cluster as the
// scheduler sees it, the core that pkg/diagnose, pkg/fleetview and
// pkg/pendingexplainer build on.
//
// Gather reads what matters from the API server into a Snapshot, a plain
// struct that also round-trips through YAML (recorded snapshots are the
// unit tests' fixtures), so that everything above it can be tested
// without a cluster. On a Snapshot it answers with the scheduler's own
// libraries (the DRA CEL environment for selectors, the structured
// allocator for "could this be allocated now"): what each node publishes
// and who holds it, whether one device could be had (the allocator
// probes, fit.go), how many more copies of a claim or pod each node takes
// (Capacity), why a claim cannot be allocated (AnalyzeClaim), what keeps a
// pod no node has yet from being scheduled (AnalyzePod), and whether
// device taints alone do (TaintBlocked).
package clusterview

import (
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Snapshot is the part of a cluster's state the operator side looks at.
type Snapshot struct {
	// DriverName is this driver's name (gpu.nvidia.com unless changed).
	DriverName string `json:"driverName"`
	// ServerVersion is the API server's gitVersion ("" when unread): the
	// operator commands warn when its minor is not the one whose
	// allocator they simulate (internal/allocator.Describe).
	ServerVersion string `json:"serverVersion,omitempty"`
	// Pods holds the pod under diagnosis, if any, and, for a Pending
	// pod, the pods bound to nodes (podfit.Slim: their requests).
	Pods []corev1.Pod `json:"pods,omitempty"`
	// Claims are all ResourceClaims: other claims' allocations decide
	// which devices are free, as they do for the scheduler.
	Claims         []resourceapi.ResourceClaim         `json:"claims,omitempty"`
	ClaimTemplates []resourceapi.ResourceClaimTemplate `json:"claimTemplates,omitempty"`
	DeviceClasses  []resourceapi.DeviceClass           `json:"deviceClasses,omitempty"`
	Slices         []resourceapi.ResourceSlice         `json:"slices,omitempty"`
	Nodes          []corev1.Node                       `json:"nodes,omitempty"`
	// PluginPods are the driver's kubelet-plugin pods (chart labels
	// app.kubernetes.io/name=gpu-dra-driver, component=kubelet-plugin).
	PluginPods []corev1.Pod `json:"pluginPods,omitempty"`
	// PluginDaemonSets are the DaemonSets that run them; their node
	// affinity explains a node without a plugin pod.
	PluginDaemonSets []appsv1.DaemonSet `json:"pluginDaemonSets,omitempty"`
	// Events of the pod, its claims and the nodes involved.
	Events []corev1.Event `json:"events,omitempty"`
	// PluginMetrics holds, by node name, the gpu_dra_* lines of the
	// plugin's /metrics (Prometheus text format).
	PluginMetrics map[string]string `json:"pluginMetrics,omitempty"`
	// KubeletMetrics holds, by node name, the kubelet's
	// plugin_manager_total_plugins lines: which plugin sockets it registered.
	KubeletMetrics map[string]string `json:"kubeletMetrics,omitempty"`
	// Unreadable lists what could not be read (RBAC, unreachable
	// endpoints); a verdict that depends on it is "could not tell".
	Unreadable []string `json:"unreadable,omitempty"`
}

// Pod returns a pod of the snapshot, or nil.
func (s *Snapshot) Pod(namespace, name string) *corev1.Pod {
	for i := range s.Pods {
		if s.Pods[i].Namespace == namespace && s.Pods[i].Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

// Claim returns a ResourceClaim of the snapshot, or nil.
func (s *Snapshot) Claim(namespace, name string) *resourceapi.ResourceClaim {
	for i := range s.Claims {
		if s.Claims[i].Namespace == namespace && s.Claims[i].Name == name {
			return &s.Claims[i]
		}
	}
	return nil
}

func (s *Snapshot) template(namespace, name string) *resourceapi.ResourceClaimTemplate {
	for i := range s.ClaimTemplates {
		if s.ClaimTemplates[i].Namespace == namespace && s.ClaimTemplates[i].Name == name {
			return &s.ClaimTemplates[i]
		}
	}
	return nil
}

func (s *Snapshot) class(name string) *resourceapi.DeviceClass {
	for i := range s.DeviceClasses {
		if s.DeviceClasses[i].Name == name {
			return &s.DeviceClasses[i]
		}
	}
	return nil
}

// Node returns a node of the snapshot, or nil.
func (s *Snapshot) Node(name string) *corev1.Node {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// PluginPodsOn returns the plugin pods bound to a node.
func (s *Snapshot) PluginPodsOn(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range s.PluginPods {
		if s.PluginPods[i].Spec.NodeName == node {
			out = append(out, &s.PluginPods[i])
		}
	}
	return out
}

// EventsFor returns the events about one object, oldest first.
func (s *Snapshot) EventsFor(kind, namespace, name string) []corev1.Event {
	var out []corev1.Event
	for _, e := range s.Events {
		o := e.InvolvedObject
		if o.Kind == kind && o.Name == name && (namespace == "" || o.Namespace == namespace) {
			out = append(out, e)
		}
	}
	sortEvents(out)
	return out
}

// sortEvents orders events by when they last happened.
func sortEvents(events []corev1.Event) {
	sort.SliceStable(events, func(i, j int) bool { return eventTime(&events[i]).Before(eventTime(&events[j])) })
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}
