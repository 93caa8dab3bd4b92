// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package diagnose answers "why is my pod Pending", "why is there no GPU on
// this node" and "why does my container not see its GPU" for this driver.
//
// The Diagnose* functions read a clusterview.Snapshot (gathered from the API
// server, or a recorded one: the unit tests' fixtures) and return a Report:
// a verdict first, then the evidence, rendered as text or JSON. Up to
// scheduling the verdict is clusterview's, the scheduler's own libraries
// run over the snapshot; after it, this package reads the plugin pod, the
// kubelet's registration, the prepare step the plugin names in its error,
// CDI and the containers' claims. WriteDump writes a snapshot fit to share.
package diagnose

import "github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"

// Status is the outcome of a diagnosis: the claims' status as clusterview
// finds it, and the report's.
type Status = clusterview.Status

// The statuses, as clusterview names them.
const (
	OK      = clusterview.OK
	Blocked = clusterview.Blocked
	Unknown = clusterview.Unknown
)

// Report is a diagnosis: a verdict first, then the evidence. It is also
// the `-o json` output.
type Report struct {
	Target  string                    `json:"target"`
	Status  Status                    `json:"status"`
	Verdict string                    `json:"verdict"`
	Pod     *PodInfo                  `json:"pod,omitempty"`
	Claims  []clusterview.ClaimReport `json:"claims,omitempty"`
	Prepare *PrepareReport            `json:"prepare,omitempty"`
	Node    *NodeReport               `json:"node,omitempty"`
	// IncompletePools are pools whose slices are not all published; the
	// scheduler uses none of their devices.
	IncompletePools []string `json:"incompletePools,omitempty"`
	// Unreadable is what the tool could not read from the cluster.
	Unreadable []string `json:"unreadable,omitempty"`
}

// ExitCode is 0 when fine, 1 when the blocking cause was found, 2 when the
// tool could not tell.
func (r *Report) ExitCode() int {
	switch r.Status {
	case OK:
		return 0
	case Blocked:
		return 1
	}
	return 2
}

// PodInfo is what the pod itself says.
type PodInfo struct {
	Phase      string          `json:"phase"`
	Node       string          `json:"node,omitempty"`
	Scheduler  string          `json:"schedulerMessage,omitempty"` // the latest FailedScheduling event
	Containers []ContainerInfo `json:"containers"`
	// Nodes are, for a Pending pod whose claims can be allocated, the
	// scheduler's filters on each node (nodeFilters).
	Nodes []clusterview.NodeFilter `json:"nodes,omitempty"`
}

// ContainerInfo is one container, the claims it uses and its state.
type ContainerInfo struct {
	Name   string   `json:"name"`
	Claims []string `json:"claims,omitempty"` // pod claim names (and requests) in resources.claims
	State  string   `json:"state"`
}

// PrepareReport is what happened after scheduling, on the node.
type PrepareReport struct {
	Node        string   `json:"node"`
	PluginPod   string   `json:"pluginPod,omitempty"`
	PluginState string   `json:"pluginState,omitempty"`
	Registered  string   `json:"registered"` // yes, no or unknown
	Events      []string `json:"events,omitempty"`
	Metrics     []string `json:"metrics,omitempty"`
	// Step is the step that failed: "plugin", "registration", one of
	// pkg/prepare/step's (from the marker in the plugin's error), or
	// "prepare" for a plugin error without a marker.
	Step string `json:"failedStep,omitempty"`
}

// NodeReport is the driver's state on one node.
type NodeReport struct {
	Name       string                    `json:"name"`
	Ready      string                    `json:"ready"`
	PluginPods []string                  `json:"pluginPods,omitempty"`
	Registered string                    `json:"registered"`
	Simulated  string                    `json:"simulatedProfile,omitempty"`
	Pools      []string                  `json:"pools,omitempty"`
	Devices    clusterview.DeviceCounts  `json:"devices"`
	Claims     []clusterview.NodeClaim   `json:"claims,omitempty"`
	Metrics    []string                  `json:"metrics,omitempty"`
	Events     []string                  `json:"events,omitempty"`
	Problems   []string                  `json:"problems,omitempty"`
	ByType     []clusterview.DeviceCount `json:"byType,omitempty"`
}
