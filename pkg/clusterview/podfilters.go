// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/podfit"
)

// NodeFilter is what the kube-scheduler's filters say of a Pending pod on
// one node: the first filter, in the scheduler's order, that keeps it off
// the node, or none.
type NodeFilter struct {
	Node string `json:"node"`
	// StoppedBy is nil where the pod passes every filter run here.
	StoppedBy *podfit.Rejection `json:"stoppedBy,omitempty"`
}

// podFilterNames are the filters nodeFilters runs, as a verdict names them.
const podFilterNames = "NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit and DynamicResources"

// nodeFilters runs the scheduler's filters for pod on every node of the
// snapshot, in the default profile's order (podfit): NodeUnschedulable,
// TaintToleration and NodeAffinity, NodeResourcesFit against the requests
// of the pods bound to the node (where the snapshot holds the node's
// status), then DynamicResources: the pod's
// allocated claims must be available on the node, and the allocator must
// allocate all its other claims there at once (CapacityOf, one copy). nil
// when the snapshot holds no nodes (they could not be read).
func nodeFilters(s *Snapshot, pod *corev1.Pod, claims []podClaim) ([]NodeFilter, error) {
	if len(s.Nodes) == 0 {
		return nil, nil
	}
	var allocated, pending []*resourceapi.ResourceClaim
	for _, pc := range claims {
		if pc.claim.Status.Allocation != nil {
			allocated = append(allocated, pc.claim)
		} else {
			pending = append(pending, pc.claim)
		}
	}
	var devices map[string]int
	if len(pending) > 0 {
		counts, err := CapacityOf(context.Background(), s, pending, 1)
		if err != nil {
			return nil, err
		}
		devices = map[string]int{}
		for _, c := range counts {
			devices[c.Node] = c.Count
		}
	}
	req := podfit.Requests(pod)
	bound := podfit.BoundByNode(s.Pods)
	dra := func(name corev1.ResourceName) bool { return extendedResourceClass(s, string(name)) != "" }
	out := make([]NodeFilter, 0, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		rej, err := podfit.Static(pod, n)
		if err != nil {
			return nil, err
		}
		// A node without its status (the pending explainer's caches drop
		// it) is not judged on CPU, memory and pod slots: zero
		// allocatable there means unknown, not full.
		if rej == nil && len(n.Status.Allocatable) > 0 {
			if fit, why := podfit.FitCount(req, podfit.RoomOn(n, bound[n.Name]), dra, 1); fit == 0 {
				rej = podfit.ResourcesRejection(why)
			}
		}
		if rej == nil {
			rej = podfit.AllocatedClaimsOn(allocated, n)
		}
		if rej == nil && devices != nil && devices[n.Name] == 0 {
			rej = podfit.CannotAllocate()
		}
		out = append(out, NodeFilter{Node: n.Name, StoppedBy: rej})
	}
	return out, nil
}

// filtersVerdict words what nodeFilters found for a Pending pod whose
// claims can be allocated: blocked when every node is filtered out, with
// the filter of each; otherwise the nodes that pass (the scheduler may
// still wait on something these filters do not check: volumes, pod
// affinity, topology spread, ports, or a scheduler that has not tried
// again yet).
func filtersVerdict(nodes []NodeFilter) (blocked bool, text string) {
	var pass, stopped []string
	for _, n := range nodes {
		if n.StoppedBy == nil {
			pass = append(pass, n.Node)
		} else {
			stopped = append(stopped, fmt.Sprintf("node %s: %s", n.Node, n.StoppedBy))
		}
	}
	if len(pass) == 0 {
		return true, "the scheduler's filters keep it off every node: " + strings.Join(stopped[:min(len(stopped), 5)], "; ") + moreNodes(len(stopped)-5)
	}
	return false, fmt.Sprintf("%s %s %s the scheduler's %s filters", plural(len(pass), "node", "nodes"), joinMax(pass, 5), plural(len(pass), "passes", "pass"), podFilterNames)
}

func moreNodes(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("; and %d more %s (-o json lists each)", n, plural(n, "node", "nodes"))
}
