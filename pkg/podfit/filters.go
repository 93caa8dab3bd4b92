// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package podfit runs the kube-scheduler's filters that decide whether a
// pod fits a node, other than DynamicResources (pkg/diagnose asks the
// scheduler's allocator that): NodeUnschedulable, TaintToleration,
// NodeAffinity and NodeResourcesFit. `capacity --for` (pkg/fleetview)
// counts with them how many copies of a pod each node takes, and
// `diagnose pod` (pkg/diagnose) names the filter that keeps a Pending pod
// off each node.
package podfit

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The kube-scheduler's filter plugins that capacity and diagnose run, in
// the order of the default profile (kubernetes pkg/scheduler/apis/config/
// v1 default_plugins.go): the first that rejects a node is the one its
// FailedScheduling event names.
//
// They are run through the libraries the plugins themselves are built on,
// k8s.io/component-helpers (taints and tolerations, node affinity, pod
// requests) and k8s.io/dynamic-resource-allocation/structured (the DRA
// allocator), not through the scheduler's framework in process, as
// kubernetes-sigs/cluster-capacity does: the framework lives in
// k8s.io/kubernetes, whose go.mod pins its staging modules at v0.0.0 and
// so needs a replace line per module in any go.mod that requires it; a
// module with replace lines cannot be installed with `go install
// ...@version`, which is how a kubectl plugin is installed (krew aside).
// What the filters do beyond these libraries is a few lines each, written
// here from the plugins' source and cited at each.
const (
	FilterNodeUnschedulable = "NodeUnschedulable"
	FilterTaintToleration   = "TaintToleration"
	FilterNodeAffinity      = "NodeAffinity"
	FilterNodeResourcesFit  = "NodeResourcesFit"
	FilterDynamicResources  = "DynamicResources"
)

// Rejection is the filter that keeps a pod (or one more copy of it) off a
// node, with its reason as the scheduler words it.
type Rejection struct {
	Filter string `json:"filter"`
	Reason string `json:"reason"`
}

func (r *Rejection) String() string {
	if r == nil {
		return ""
	}
	return r.Filter + ": " + r.Reason
}

// Static runs the filters whose answer does not change as copies of a pod
// are added: NodeUnschedulable, TaintToleration and NodeAffinity, in that
// order. nil: node passes all three.
func Static(pod *corev1.Pod, node *corev1.Node) (*Rejection, error) {
	// NodeUnschedulable (plugins/nodeunschedulable, Filter): a cordoned
	// node, unless the pod tolerates the unschedulable taint.
	unschedulable := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, unschedulable, true) {
		return &Rejection{FilterNodeUnschedulable, "node(s) were unschedulable"}, nil
	}
	// TaintToleration (plugins/tainttoleration, Filter): the NoSchedule
	// and NoExecute taints the pod does not tolerate. The scheduler's
	// message no longer shows the taint ("untolerated taint(s)"); the
	// taint is added here, an operator's next question.
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, ok := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noSchedule, true); ok {
		return &Rejection{FilterTaintToleration, fmt.Sprintf("node(s) had untolerated taint(s) (%s)", t.ToString())}, nil
	}
	// NodeAffinity (plugins/nodeaffinity, Filter): nodeSelector and
	// required node affinity.
	match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node)
	if err != nil {
		return nil, fmt.Errorf("the pod's node affinity: %w", err)
	}
	if !match {
		return &Rejection{FilterNodeAffinity, "node(s) didn't match Pod's node affinity/selector"}, nil
	}
	return nil, nil
}

// CannotAllocate is DynamicResources' rejection of a node where the
// allocator finds devices for not all of the pod's claims at once
// (plugins/dynamicresources, Filter).
func CannotAllocate() *Rejection {
	return &Rejection{FilterDynamicResources, "cannot allocate all claims"}
}

// AllocatedClaimsOn rejects a node where an allocated claim the pod
// shares is not available (plugins/dynamicresources, Filter, with the
// claim's allocation.nodeSelector).
func AllocatedClaimsOn(claims []*resourceapi.ResourceClaim, node *corev1.Node) *Rejection {
	for _, c := range claims {
		if c.Status.Allocation == nil || c.Status.Allocation.NodeSelector == nil {
			continue // devices reachable from every node
		}
		sel, err := nodeaffinity.NewNodeSelector(c.Status.Allocation.NodeSelector)
		if err != nil || !sel.Match(node) {
			return &Rejection{FilterDynamicResources, "resourceclaim not available on the node (claim " + c.Name + " is allocated elsewhere)"}
		}
	}
	return nil
}
