// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The kube-scheduler's filter plugins that capacity runs, in the order of
// the default profile (kubernetes pkg/scheduler/apis/config/v1
// default_plugins.go): the first that rejects a node is the one its
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

// Rejection is the filter that stopped a node from taking one more copy,
// with its reason as the scheduler words it.
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

// staticFilters are the filters whose answer does not change as copies
// are added: NodeUnschedulable, TaintToleration and NodeAffinity.
func staticFilters(pod *corev1.Pod, node *corev1.Node) (*Rejection, error) {
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

// nodeRoom is what NodeResourcesFit compares a pod's requests with: the
// node's allocatable less what its pods request, and its pod slots.
type nodeRoom struct {
	free corev1.ResourceList
	pods int64
}

// roomOn sums the requests of the pods bound to node, as the scheduler's
// NodeInfo does (framework/types.go: resourcehelper.PodRequests of each
// pod, overhead included, no defaults for missing requests).
func roomOn(node *corev1.Node, pods []*corev1.Pod) nodeRoom {
	room := nodeRoom{free: corev1.ResourceList{}}
	for name, q := range node.Status.Allocatable {
		if name == corev1.ResourcePods {
			room.pods = q.Value()
			continue
		}
		room.free[name] = q.DeepCopy()
	}
	for _, p := range pods {
		room.pods--
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			left := room.free[name]
			left.Sub(q)
			room.free[name] = left
		}
	}
	return room
}

// fitCount is how many copies of a pod requesting req fit in room, and
// the reasons the next one would not (plugins/noderesources/fit.go,
// fitsRequest: pods first, then each requested resource; a resource the
// pod does not request is not checked). dra are resources the scheduler
// leaves to DynamicResources (extended resources of a DeviceClass).
func fitCount(req corev1.ResourceList, room nodeRoom, dra func(corev1.ResourceName) bool, limit int) (int, []string) {
	n := int64(limit)
	var why []string
	take := func(k int64, reason string) {
		switch {
		case k < n:
			n, why = k, []string{reason}
		case k == n:
			why = append(why, reason)
		}
	}
	take(max(room.pods, 0), "Too many pods")
	for _, name := range sortedResources(req) {
		q := req[name]
		if q.IsZero() || name == corev1.ResourcePods || dra(name) {
			continue
		}
		left := room.free[name]
		take(copiesIn(left, q), "Insufficient "+string(name))
	}
	if n == int64(limit) {
		why = nil
	}
	return int(n), why
}

// copiesIn is how many times need fits in left (0 when left is negative).
func copiesIn(left, need resource.Quantity) int64 {
	if left.Sign() <= 0 {
		return 0
	}
	return left.MilliValue() / need.MilliValue()
}

// sortedResources lists a request's resources in the order fitsRequest
// checks them: cpu, memory, ephemeral-storage, then the rest by name.
func sortedResources(req corev1.ResourceList) []corev1.ResourceName {
	first := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	var out, rest []corev1.ResourceName
	for _, f := range first {
		if _, ok := req[f]; ok {
			out = append(out, f)
		}
	}
	for name := range req {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
