// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Fill levels: before the timed pods, every node already holds a share of
// what its layout can hold, as a busy fleet does. The fill claims are
// allocated by the scheduler's own allocator (internal/schedtest: the
// 1.37 structured allocator with the default features, those of the
// benchmark's default gates) on the template node, one after the other as
// the scheduler would place pods arriving one by one, and written to every
// node with only the node renamed: first fit is deterministic, so node i
// gets what the scheduler would have given it. They are claims with an
// allocation and no consumer, which the scheduler counts as allocated and
// which nothing deallocates (the resourceclaim controller deallocates only
// when the last consumer goes). Going through the scheduler itself would
// take longer than the measurement: 90% of 500 MIG nodes is 25,000 pods.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/node"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
)

const fillNamespace = "bench-fill"

// nodeFill is what one node can hold of a layout's claims, and the
// allocations of as many as fit, in arrival order.
type nodeFill struct {
	results []resourceapi.AllocationResult
}

// capacity is how many of the layout's claims fit one node.
func (f nodeFill) capacity() int { return len(f.results) }

// held is how many claims fill percent of a node.
func (f nodeFill) held(percent int) int { return f.capacity() * percent / 100 }

// timedPods is how many pods a run times on n nodes with free claims'
// worth of room each: ppn per node, but never more than half the room,
// so that a run measures the fleet at its fill level and not the last
// free device of a full fleet, where the scheduler must search every node
// for the few left (at 90% whole GPUs have one free GPU per node: the
// timed pods then fill every other node).
func timedPods(n, ppn, free int) int {
	return max(1, min(n*ppn, n*free/2))
}

// cappedPods is pods, or limit where that is smaller (limit 0: no limit).
func cappedPods(pods, limit int) int {
	if limit > 0 {
		return min(pods, limit)
	}
	return pods
}

// planFill allocates the layout's claim on the template node until no
// more fits (at most 1,000).
func planFill(tmpl []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass, l layout) (f nodeFill, err error) {
	var rec node.Recorder
	defer rec.Recover(&err)
	c := schedtest.NewFromSlices(&rec, templateNode, tmpl)
	c.Classes = classes
	for i := range 1000 {
		claim := schedtest.Claim(fmt.Sprintf("fill-%d", i), resourceapi.DeviceRequest{Name: "gpu", Exactly: l.request.DeepCopy()})
		r := c.Allocate(claim)
		if r == nil {
			break
		}
		f.results = append(f.results, *r)
	}
	if f.capacity() == 0 {
		return f, fmt.Errorf("layout %s: not one claim fits the template node", l.name)
	}
	return f, nil
}

// forNode is a template allocation moved to node name.
func forNode(r resourceapi.AllocationResult, name string) *resourceapi.AllocationResult {
	out := r.DeepCopy()
	for i := range out.Devices.Results {
		out.Devices.Results[i].Pool = strings.ReplaceAll(out.Devices.Results[i].Pool, templateNode, name)
	}
	if ns := out.NodeSelector; ns != nil {
		for i := range ns.NodeSelectorTerms {
			t := &ns.NodeSelectorTerms[i]
			for _, reqs := range [][]corev1.NodeSelectorRequirement{t.MatchFields, t.MatchExpressions} {
				for j := range reqs {
					for k, v := range reqs[j].Values {
						reqs[j].Values[k] = strings.ReplaceAll(v, templateNode, name)
					}
				}
			}
		}
	}
	return out
}

// addFill writes claims from..to-1 of f to each of the n nodes.
func addFill(ctx context.Context, cs kubernetes.Interface, l layout, f nodeFill, n, from, to, workers int) error {
	if to <= from {
		return nil
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fillNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	per := to - from
	return parallel(ctx, n*per, workers, func(ctx context.Context, i int) error {
		name, k := nodeName(i/per), from+i%per
		rc := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%s-%d", name, k)},
			Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: l.request.DeepCopy()}}}},
		}
		rc, err := cs.ResourceV1().ResourceClaims(fillNamespace).Create(ctx, rc, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("fill claim: %w", err)
		}
		rc.Status.Allocation = forNode(f.results[k], name)
		if _, err := cs.ResourceV1().ResourceClaims(fillNamespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("fill claim %s allocation: %w", rc.Name, err)
		}
		return nil
	})
}

// checkFillHeld fails when a timed claim got a device that a fill claim
// holds: the scheduler would then not have counted the fill, and the run
// would measure an emptier fleet than it says. Shared devices (memory
// fractions) may be held by several claims.
func checkFillHeld(ctx context.Context, cs kubernetes.Interface) error {
	held := map[string]string{}
	fill, err := cs.ResourceV1().ResourceClaims(fillNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	key := func(r resourceapi.DeviceRequestAllocationResult) string { return r.Pool + "/" + r.Device }
	for _, rc := range fill.Items {
		if a := rc.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if r.ShareID == nil {
					held[key(r)] = rc.Name
				}
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	timed, err := cs.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, rc := range timed.Items {
		if a := rc.Status.Allocation; a != nil {
			for _, r := range a.Devices.Results {
				if owner, ok := held[key(r)]; ok {
					return fmt.Errorf("claim %s was allocated %s, which fill claim %s holds: the scheduler did not count the fill", rc.Name, key(r), owner)
				}
			}
		}
	}
	return nil
}
