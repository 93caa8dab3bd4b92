// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/podfit"
)

// NodePodCapacity is how many more copies of a pod one node takes, and
// which filter turns the next one away.
type NodePodCapacity struct {
	Node  string `json:"node"`
	Count int    `json:"count"`
	// AtLimit: the count stopped at the limit; the node may take more.
	AtLimit bool `json:"atLimit,omitempty"`
	// StoppedBy is the first filter, in the scheduler's order, that
	// rejects copy Count+1 (nil at the limit).
	StoppedBy *podfit.Rejection `json:"stoppedBy,omitempty"`
}

// PodCapacityReport is `capacity --for` and `capacity -f`'s answer.
type PodCapacityReport struct {
	For string `json:"for"`
	// Requests are one copy's requests as NodeResourcesFit sees them.
	Requests map[corev1.ResourceName]string `json:"requests,omitempty"`
	// Claims are the claims each copy gets allocated afresh, by name.
	Claims  []string          `json:"claims,omitempty"`
	Nodes   []NodePodCapacity `json:"nodes"`
	Total   int               `json:"total"`
	AtLimit bool              `json:"atLimit,omitempty"`
}

// PodCapacity counts, node by node, how many more copies of the shape's
// pod the scheduler would place now, as cluster-capacity does: copies are
// added one at a time until one does not pass the filters. The
// snapshot's Pods are the pods bound to nodes (their requests take room),
// its Nodes every node. Only node is counted when it is not empty.
//
// NodeUnschedulable, TaintToleration and NodeAffinity say the same for
// every copy; NodeResourcesFit and DynamicResources count down as copies
// take CPU, memory, pod slots and devices; the two are independent, so a
// node takes the smaller of their counts.
func PodCapacity(ctx context.Context, s *clusterview.Snapshot, shape *PodShape, node string, limit int) (*PodCapacityReport, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("--max-per-node %d: must be at least 1", limit)
	}
	pod := &shape.Pod
	claims, err := clusterview.ClaimsOfNewPod(s, pod)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shape.From, err)
	}
	rep := &PodCapacityReport{For: shape.From, Requests: map[corev1.ResourceName]string{}}
	req := podfit.Requests(pod)
	for name, q := range req {
		rep.Requests[name] = q.String()
	}
	for _, c := range claims.PerPod {
		rep.Claims = append(rep.Claims, c.Name)
	}
	nodes := s.Nodes
	if node != "" {
		nodes = nil
		for _, n := range s.Nodes {
			if n.Name == node {
				nodes = append(nodes, n)
			}
		}
		if len(nodes) == 0 {
			return nil, fmt.Errorf("--node %s: no such node (kubectl get nodes)", node)
		}
	}
	// Devices: copies of the pod's own claims, all allocated at once per
	// copy with the scheduler's allocator.
	var devices map[string]clusterview.NodeCapacity
	if len(claims.PerPod) > 0 {
		devices = map[string]clusterview.NodeCapacity{}
		ds := s
		if node != "" {
			ds = narrow(s, node)
		}
		counts, err := clusterview.CapacityOf(ctx, ds, claims.PerPod, limit)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape.From, err)
		}
		for _, c := range counts {
			devices[c.Node] = c
		}
	}
	bound := podfit.BoundByNode(s.Pods)
	dra := func(name corev1.ResourceName) bool { return clusterview.ExtendedResourceClass(s, string(name)) != "" }
	for i := range nodes {
		n := &nodes[i]
		nc := NodePodCapacity{Node: n.Name}
		rej, err := podfit.Static(pod, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape.From, err)
		}
		if rej == nil {
			rej = podfit.AllocatedClaimsOn(claims.Allocated, n)
		}
		if rej != nil {
			nc.StoppedBy = rej
			rep.Nodes = append(rep.Nodes, nc)
			continue
		}
		fit, why := podfit.FitCount(req, podfit.RoomOn(n, bound[n.Name]), dra, limit)
		dev := limit
		if devices != nil {
			dev = devices[n.Name].Count // 0 where the node publishes no slices
		}
		nc.Count = min(fit, dev)
		switch {
		case nc.Count == limit:
			nc.AtLimit = true
		case fit == nc.Count:
			nc.StoppedBy = podfit.ResourcesRejection(why)
		default:
			nc.StoppedBy = podfit.CannotAllocate()
		}
		rep.Nodes = append(rep.Nodes, nc)
	}
	sort.Slice(rep.Nodes, func(i, j int) bool { return rep.Nodes[i].Node < rep.Nodes[j].Node })
	for _, n := range rep.Nodes {
		rep.Total += n.Count
		rep.AtLimit = rep.AtLimit || n.AtLimit
	}
	return rep, nil
}

// narrow is the snapshot with only node's slices.
func narrow(s *clusterview.Snapshot, node string) *clusterview.Snapshot {
	n := *s
	n.Slices = nil
	for _, sl := range s.Slices {
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName == node {
			n.Slices = append(n.Slices, sl)
		}
	}
	return &n
}

// WriteJSON writes the report as indented JSON.
func (r *PodCapacityReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable writes one row per node: how many more copies it takes and
// the filter that turns the next away, then the total.
func (r *PodCapacityReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tFITS\tSTOPPED BY")
	for _, n := range r.Nodes {
		count := fmt.Sprint(n.Count)
		if n.AtLimit {
			count += "+ (stopped at the limit)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Node, count, n.StoppedBy)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := fmt.Sprint(r.Total)
	if r.AtLimit {
		total = "at least " + total
	}
	_, err := fmt.Fprintf(w, "TOTAL: %s more pods of %s fit now (%s counted)\n", total, r.For, plural(len(r.Nodes), "node"))
	return err
}
