// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// scope is where this driver's devices carry NoSchedule or NoExecute
// taints: the nodes of such slices, and the pools of such slices that
// belong to no single node. A diagnosis looks only there. The question is
// "would the pod fit there but for the taints", and the scheduler has
// already said that it fits nowhere. Looking at the whole cluster would
// cost a CEL evaluation of every device of every node per Pending pod:
// BenchmarkTaintBlocked measures ~0.4 s and ~260 MB allocated per pod at
// 100 nodes of eight H100s with dynamic MIG, against ~6 ms at one node.
//
// The slice cache draws the same line for memory: only the slices that
// make the scope (this driver's tainted ones) are cached whole, the rest
// as stubs that hold what taintScope and holds read (stub.go), and a
// diagnosis lists the other slices of the nodes in scope (live.go). A stub
// has no devices, so it never puts a node in scope.
type scope struct {
	nodes map[string]bool
	pools map[string]bool
}

func taintScope(driver string, all []*resourceapi.ResourceSlice) scope {
	sc := scope{nodes: map[string]bool{}, pools: map[string]bool{}}
	for _, s := range all {
		if s.Spec.Driver != driver || !anyTaint(s) {
			continue
		}
		if node := nodeOf(s); node != "" {
			sc.nodes[node] = true
		} else {
			sc.pools[poolOf(s)] = true
		}
	}
	return sc
}

func (sc scope) empty() bool { return len(sc.nodes) == 0 && len(sc.pools) == 0 }

// holds keeps every driver's slices of a tainted node (another claim of
// the pod may need them) and the tainted node-less pools.
func (sc scope) holds(s *resourceapi.ResourceSlice) bool {
	if node := nodeOf(s); node != "" {
		return sc.nodes[node]
	}
	return sc.pools[poolOf(s)]
}

func (sc scope) holdsNode(n *corev1.Node) bool { return sc.nodes[n.Name] }

func anyTaint(s *resourceapi.ResourceSlice) bool {
	for _, d := range s.Spec.Devices {
		for _, t := range d.Taints {
			if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
				return true
			}
		}
	}
	return false
}

func nodeOf(s *resourceapi.ResourceSlice) string {
	if s.Spec.NodeName != nil {
		return *s.Spec.NodeName
	}
	return ""
}

func poolOf(s *resourceapi.ResourceSlice) string { return s.Spec.Driver + "/" + s.Spec.Pool.Name }

// inScope copies the objects keep accepts.
func inScope[T any](list []*T, keep func(*T) bool) []T {
	out := make([]T, 0, len(list))
	for _, x := range list {
		if keep(x) {
			out = append(out, *x)
		}
	}
	return out
}
