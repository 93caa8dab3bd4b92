// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// listed is what the API server returned for one node, or one node-less
// pool, of the scope.
type listed struct {
	versions map[string]string // slice name -> resourceVersion
	slices   []resourceapi.ResourceSlice
}

// current: the cache shows the same slices at the same versions as the
// List did, so the List still holds. RVs name one state of an object, and
// the cache sees every change, so there is no need for a time limit.
func (l listed) current(cached []*resourceapi.ResourceSlice) bool {
	if len(l.versions) != len(cached) {
		return false
	}
	for _, s := range cached {
		if rv, ok := l.versions[s.Name]; !ok || rv != s.ResourceVersion {
			return false
		}
	}
	return true
}

// group is the cached slices of one node, or of one node-less pool, in
// scope.
type group struct {
	node, driver, pool string // a node, or else a driver's pool
	cached             []*resourceapi.ResourceSlice
	stubbed            bool
}

// slicesInScope copies the slices scope holds, whole, for a snapshot. A
// node or pool in scope whose cache has stubs (stub.go) is listed from the
// API server instead, all of it, so that its slices come from one point in
// time: the untainted ones the verdict may need (a dynamic MIG node's
// counters, another driver's devices of the node) are not in the cache.
//
// A List is kept while the cache shows the same slices at the same
// versions: the pods one pass (queueAll) explains, and later passes where
// nothing changed there, share it. Only the lists of the current scope are
// kept, so the memory is that of the nodes with tainted devices.
func (e *Explainer) slicesInScope(ctx context.Context, all []*resourceapi.ResourceSlice, sc scope) ([]resourceapi.ResourceSlice, error) {
	groups := map[string]*group{}
	var order []string
	for _, s := range all {
		if !sc.holds(s) {
			continue
		}
		k := "pool " + poolOf(s)
		if n := nodeOf(s); n != "" {
			k = "node " + n
		}
		g := groups[k]
		if g == nil {
			g = &group{node: nodeOf(s), driver: s.Spec.Driver, pool: s.Spec.Pool.Name}
			groups[k] = g
			order = append(order, k)
		}
		g.cached = append(g.cached, s)
		g.stubbed = g.stubbed || isStub(s)
	}

	e.liveMu.Lock()
	defer e.liveMu.Unlock()
	kept := map[string]listed{}
	byDriver := map[string][]resourceapi.ResourceSlice{} // node-less slices, listed once per call
	var out []resourceapi.ResourceSlice
	for _, k := range order {
		g := groups[k]
		if !g.stubbed {
			for _, s := range g.cached {
				out = append(out, *s)
			}
			continue
		}
		l, ok := e.live[k]
		if !ok || !l.current(g.cached) {
			items, err := e.list(ctx, g, byDriver)
			if err != nil {
				return nil, err
			}
			l = listed{versions: make(map[string]string, len(items)), slices: items}
			for _, s := range items {
				l.versions[s.Name] = s.ResourceVersion
			}
		}
		kept[k] = l
		out = append(out, l.slices...)
	}
	e.live = kept
	return out, nil
}

// list reads a group's slices from the API server: a node's by the
// spec.nodeName field selector (every driver's, as scope.holds keeps), a
// node-less pool's by its driver and an empty spec.nodeName, filtered by
// pool name here: an API server older than the spec.pool.name selector
// (the chart allows 1.34) would reject a List that used it.
func (e *Explainer) list(ctx context.Context, g *group, byDriver map[string][]resourceapi.ResourceSlice) ([]resourceapi.ResourceSlice, error) {
	api := e.cfg.Client.ResourceV1().ResourceSlices()
	if g.node != "" {
		sel := fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, g.node).String()
		l, err := api.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("listing the ResourceSlices of node %s: %w", g.node, err)
		}
		return l.Items, nil
	}
	nodeless, ok := byDriver[g.driver]
	if !ok {
		sel := fields.AndSelectors(fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, g.driver),
			fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, "")).String()
		l, err := api.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("listing the node-less ResourceSlices of %s: %w", g.driver, err)
		}
		nodeless = l.Items
		byDriver[g.driver] = nodeless
	}
	var out []resourceapi.ResourceSlice
	for _, s := range nodeless {
		if s.Spec.NodeName == nil && s.Spec.Pool.Name == g.pool {
			out = append(out, s)
		}
	}
	return out, nil
}

// dropListed frees the lists once no node is in scope: no later pass
// would replace them.
func (e *Explainer) dropListed() {
	e.liveMu.Lock()
	defer e.liveMu.Unlock()
	e.live = nil
}
