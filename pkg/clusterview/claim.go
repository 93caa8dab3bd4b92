// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// AnalyzeClaim reports one claim as the scheduler sees it: its
// allocation, or whether and why the scheduler's allocator cannot allocate
// it now, on any node (the devices the claim holds count as free).
// incompletePools are the pools the scheduler uses no device of.
func AnalyzeClaim(s *Snapshot, claim *resourceapi.ResourceClaim) (cr ClaimReport, incompletePools []string) {
	c := published(s, string(claim.UID))
	incompletePools = c.incompletePools()
	return c.analyzeClaim(claim, "", c.candidateNodes(nil, nil)), incompletePools
}

// analyzeClaim reports a claim's allocation, or walks its requests on
// nodes, those the pod may use (podNodes; every node for a claim on its
// own): only their devices are counted, offered and allocated.
func (c *cluster) analyzeClaim(claim *resourceapi.ResourceClaim, podClaim string, nodes []*corev1.Node) ClaimReport {
	cr := ClaimReport{PodClaim: podClaim, Status: OK}
	if claim.Name != "" {
		cr.Name = claim.Namespace + "/" + claim.Name
	}
	for _, ref := range claim.Status.ReservedFor {
		cr.ReservedFor = append(cr.ReservedFor, strings.TrimSuffix(ref.Resource, "s")+" "+ref.Name)
	}
	for _, d := range claim.Status.Devices {
		info := d.Pool + "/" + d.Device
		if d.Data != nil {
			info += " " + string(d.Data.Raw)
		}
		cr.DeviceInfo = append(cr.DeviceInfo, info)
	}
	if a := claim.Status.Allocation; a != nil {
		cr.Allocated = true
		for _, d := range a.Devices.Results {
			cr.Devices = append(cr.Devices, d.Pool+"/"+d.Device)
			if dev := c.byKey[d.Driver+"/"+d.Pool+"/"+d.Device]; dev != nil && dev.Node != "" {
				cr.Node = dev.Node
			}
		}
		if cr.Node == "" {
			cr.Node = allocationNode(a)
		}
		return cr
	}
	names := map[string]bool{"": true} // a device of no one node is reachable from every node
	for _, n := range nodes {
		names[n.Name] = true
	}
	eligible := func(node string) bool { return names[node] }
	for _, req := range claim.Spec.Devices.Requests {
		if req.Exactly != nil {
			rr := c.analyzeRequest(req.Name, req.Exactly, eligible)
			cr.Requests = append(cr.Requests, rr)
			if p := c.problem(rr); p != "" && cr.Problem == "" {
				cr.Status, cr.Problem = Blocked, p
			}
			continue
		}
		// A prioritized list fits when any of its subrequests does.
		var first string
		fits := false
		for _, sub := range req.FirstAvailable {
			exact := &resourceapi.ExactDeviceRequest{DeviceClassName: sub.DeviceClassName, Selectors: sub.Selectors, AllocationMode: sub.AllocationMode,
				Count: sub.Count, Tolerations: sub.Tolerations, Capacity: sub.Capacity}
			rr := c.analyzeRequest(req.Name+"/"+sub.Name, exact, eligible)
			cr.Requests = append(cr.Requests, rr)
			p := c.problem(rr)
			if p == "" {
				fits = true
			} else if first == "" {
				first = p
			}
		}
		if !fits && cr.Problem == "" {
			cr.Status, cr.Problem = Blocked, "no subrequest of "+req.Name+" can be satisfied; the first: "+first
		}
	}
	if cr.Status == Blocked {
		return cr
	}
	node, err := c.allocate(claim, nodes)
	switch {
	case err != nil:
		cr.Status, cr.Problem = Blocked, fmt.Sprintf("the scheduler's allocator rejects the claim: %v", err)
		cr.Allocator = cr.Problem
	case node != "":
		cr.Allocator = "the scheduler's allocator fits it on node " + node + " now"
		cr.Status = Unknown
	default:
		cr.Allocator = "the scheduler's allocator finds no node for it"
		if p := c.constraintProblem(claim, nodes); p != "" {
			cr.Status, cr.Problem = Blocked, p
		} else {
			cr.Status, cr.Problem = Unknown, "each request has enough free devices on its own, but the allocator finds no node where all of them fit together"
		}
	}
	return cr
}

// allocationNode reads the node name from an allocation's node selector
// (matchFields metadata.name, as the scheduler writes for node-local
// devices).
func allocationNode(a *resourceapi.AllocationResult) string {
	if a.NodeSelector == nil {
		return ""
	}
	for _, t := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range t.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// extendedResourceClaim builds the claim the scheduler would create for a
// pod's extended resources that a DeviceClass maps (nvidia.com/gpu), so a
// Pending pod with `limits: {nvidia.com/gpu: 1}` is explained like a claim.
func extendedResourceClaim(s *Snapshot, pod *corev1.Pod) *resourceapi.ResourceClaim {
	byName := map[string]string{}
	for _, dc := range s.DeviceClasses {
		if dc.Spec.ExtendedResourceName != nil {
			byName[*dc.Spec.ExtendedResourceName] = dc.Name
		}
	}
	counts := map[string]int64{}
	for _, ctr := range pod.Spec.Containers {
		for res, q := range ctr.Resources.Limits {
			if _, ok := byName[string(res)]; ok {
				counts[string(res)] += q.Value()
			}
		}
	}
	if len(counts) == 0 {
		return nil
	}
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	claim := &resourceapi.ResourceClaim{}
	claim.Namespace = pod.Namespace
	for i, n := range names {
		claim.Spec.Devices.Requests = append(claim.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name: fmt.Sprintf("extended-resource-%d", i),
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: byName[n], AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Count: counts[n]},
		})
	}
	return claim
}
