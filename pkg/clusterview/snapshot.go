// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package diagnose answers "why is my pod Pending", "why is there no GPU on
// this node" and "why does my container not see its GPU" for this driver.
//
// It works in two steps so that every verdict can be tested without a
// cluster: Gather reads what matters from the API server into a Snapshot, a
// plain struct that also round-trips through YAML (the unit tests' fixtures
// are recorded snapshots), and the Diagnose* functions analyse a Snapshot
// and return a Report. The analysis uses the scheduler's own libraries: the
// DRA CEL environment for selectors and the structured allocator for the
// final "could this claim be allocated now" answer.
package diagnose

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Snapshot is the part of a cluster's state a diagnosis looks at.
type Snapshot struct {
	// DriverName is this driver's name (gpu.nvidia.com unless changed).
	DriverName string `json:"driverName"`
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

func (s *Snapshot) pod(namespace, name string) *corev1.Pod {
	for i := range s.Pods {
		if s.Pods[i].Namespace == namespace && s.Pods[i].Name == name {
			return &s.Pods[i]
		}
	}
	return nil
}

func (s *Snapshot) claim(namespace, name string) *resourceapi.ResourceClaim {
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

func (s *Snapshot) node(name string) *corev1.Node {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// pluginPodsOn returns the plugin pods bound to a node.
func (s *Snapshot) pluginPodsOn(node string) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range s.PluginPods {
		if s.PluginPods[i].Spec.NodeName == node {
			out = append(out, &s.PluginPods[i])
		}
	}
	return out
}

// eventsFor returns the events about one object, oldest first.
func (s *Snapshot) eventsFor(kind, namespace, name string) []corev1.Event {
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
