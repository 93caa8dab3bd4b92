// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package podfit

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Room is what NodeResourcesFit compares a pod's requests with: the
// node's allocatable less what its pods request, and its pod slots.
type Room struct {
	free corev1.ResourceList
	pods int64
}

// RoomOn sums the requests of the pods bound to node, as the scheduler's
// NodeInfo does (framework/types.go: resourcehelper.PodRequests of each
// pod, overhead included, no defaults for missing requests).
func RoomOn(node *corev1.Node, pods []*corev1.Pod) Room {
	room := Room{free: corev1.ResourceList{}}
	for name, q := range node.Status.Allocatable {
		if name == corev1.ResourcePods {
			room.pods = q.Value()
			continue
		}
		room.free[name] = q
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

// FitCount is how many copies (up to limit) of a pod requesting req fit
// in room, and the reasons the next one would not (plugins/noderesources/
// fit.go, fitsRequest: pods first, then each requested resource; a
// resource the pod does not request is not checked). dra are resources
// the scheduler leaves to DynamicResources (extended resources of a
// DeviceClass).
func FitCount(req corev1.ResourceList, room Room, dra func(corev1.ResourceName) bool, limit int) (int, []string) {
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

// Requests are a pod's requests as NodeResourcesFit sees them
// (resourcehelper.PodRequests: containers, init containers, overhead).
func Requests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// ResourcesRejection is NodeResourcesFit's rejection for FitCount's
// reasons.
func ResourcesRejection(why []string) *Rejection {
	return &Rejection{FilterNodeResourcesFit, strings.Join(why, ", ")}
}

// BoundByNode groups the pods bound to a node and not ended by node name:
// those whose requests take the node's room.
func BoundByNode(pods []corev1.Pod) map[string][]*corev1.Pod {
	bound := map[string][]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		}
	}
	return bound
}
