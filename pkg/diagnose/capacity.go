// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
)

// NodeCapacity is how many more copies of a claim one node can take.
type NodeCapacity struct {
	Node  string `json:"node"`
	Count int    `json:"count"`
	// AtLimit says the count stopped at the limit: the node may take more.
	AtLimit bool `json:"atLimit,omitempty"`
}

// Capacity counts, for each node that publishes slices of the snapshot's
// driver, how many more claims like claim the scheduler could allocate
// there now: it allocates copies one by one with the scheduler's own
// allocator on the node's slices, with every allocation of the snapshot's
// claims and of the copies before booked, until one does not fit (or limit
// copies did). This is what creating that many pods one after the other
// does, as far as devices go: CPU, memory and node taints are the
// scheduler's other plugins' business. Nodes are independent (a claim's
// devices come from one node), so they are counted in parallel. Slices not
// bound to one node (allNodes, nodeSelector) are left out: counting them
// per node would count their devices once per node.
func Capacity(ctx context.Context, s *Snapshot, claim *resourceapi.ResourceClaim, limit int) ([]NodeCapacity, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("capacity limit %d: must be at least 1", limit)
	}
	// The slices and the allocations of each node.
	nodeSlices := map[string][]*resourceapi.ResourceSlice{}
	poolNode := map[string]string{}
	for i := range s.Slices {
		sl := &s.Slices[i]
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName == "" {
			continue
		}
		n := *sl.Spec.NodeName
		nodeSlices[n] = append(nodeSlices[n], sl)
		poolNode[sl.Spec.Driver+"/"+sl.Spec.Pool.Name] = n
	}
	var nodes []string
	for n, sls := range nodeSlices {
		for _, sl := range sls {
			if sl.Spec.Driver == s.DriverName {
				nodes = append(nodes, n)
				break
			}
		}
	}
	sort.Strings(nodes)
	nodeAllocs := map[string][]*resourceapi.AllocationResult{}
	for i := range s.Claims {
		a := s.Claims[i].Status.Allocation
		if a == nil {
			continue
		}
		seen := map[string]bool{}
		for _, d := range a.Devices.Results {
			if n, ok := poolNode[d.Driver+"/"+d.Pool]; ok && !seen[n] {
				seen[n] = true
				nodeAllocs[n] = append(nodeAllocs[n], a)
			}
		}
	}

	probe := claim.DeepCopy()
	probe.Status = resourceapi.ResourceClaimStatus{}
	match, err := s.requestMatcher(probe)
	if err != nil {
		return nil, err
	}
	out := make([]NodeCapacity, len(nodes))
	errs := make([]error, len(nodes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i], errs[i] = s.nodeCapacity(ctx, nodes[i], nodeSlices[nodes[i]], nodeAllocs[nodes[i]], poolNode, probe, match, limit)
			}
		}()
	}
	for i := range nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Snapshot) nodeCapacity(ctx context.Context, name string, slices []*resourceapi.ResourceSlice, allocs []*resourceapi.AllocationResult,
	poolNode map[string]string, probe *resourceapi.ResourceClaim, match func(driver string, d *resourceapi.Device) bool, limit int) (NodeCapacity, error) {
	node := s.node(name)
	if node == nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	}
	state := newAllocatedState()
	onNode := func(driver, pool string) bool { return poolNode[driver+"/"+pool] == name }
	for _, a := range allocs {
		state.book(a, onNode)
	}
	slices = candidates(slices, state, match)
	nc := NodeCapacity{Node: name}
	for nc.Count < limit {
		if err := ctx.Err(); err != nil {
			return nc, err
		}
		// A new allocator each round: the allocator may cache what it
		// derived from the allocated state, which each round changes.
		alloc, err := structured.NewAllocator(ctx, schedulerFeatures, structured.AllocatedState(state), classLister{s}, slices, celCache)
		if err != nil {
			return nc, err
		}
		res, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{probe})
		if err != nil {
			return nc, fmt.Errorf("node %s: %w", name, err)
		}
		if len(res) == 0 {
			return nc, nil
		}
		state.book(&res[0], nil)
		nc.Count++
	}
	nc.AtLimit = true
	return nc, nil
}

// requestMatcher returns whether a device may match one of the claim's
// requests (or subrequests) by its class's and its own CEL selectors. The
// allocator evaluates those selectors for every device it looks at, in
// every round; on a dynamic-MIG node most devices match no request, so
// evaluating each once here and handing the allocator the rest is most of
// the speed of a fleet-wide count. A selector that fails on a device keeps
// the device: the allocator then reports the error as the scheduler would.
func (s *Snapshot) requestMatcher(claim *resourceapi.ResourceClaim) (func(driver string, d *resourceapi.Device) bool, error) {
	var alternatives [][]selector
	add := func(request, class string, sels []resourceapi.DeviceSelector) error {
		dc := s.class(class)
		if dc == nil {
			return fmt.Errorf("request %s: DeviceClass %q does not exist", request, class)
		}
		all := append(compileSelectors("class "+class, dc.Spec.Selectors), compileSelectors("request "+request, sels)...)
		for _, sel := range all {
			if sel.compiled.Error != nil {
				return fmt.Errorf("%s: selector %q: %s", sel.Source, sel.Expression, sel.compiled.Error.Detail)
			}
		}
		alternatives = append(alternatives, all)
		return nil
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil {
			if err := add(r.Name, r.Exactly.DeviceClassName, r.Exactly.Selectors); err != nil {
				return nil, err
			}
		}
		for _, sub := range r.FirstAvailable {
			if err := add(r.Name+"/"+sub.Name, sub.DeviceClassName, sub.Selectors); err != nil {
				return nil, err
			}
		}
	}
	return func(driver string, d *resourceapi.Device) bool {
		dev := &device{Driver: driver, Dev: d}
		for _, sels := range alternatives {
			ok := true
			for _, sel := range sels {
				m, err := sel.matches(dev)
				if err != nil {
					return true
				}
				if !m {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		return false
	}, nil
}

// candidates narrows a node's slices to the devices that may match the
// claim and those already allocated (whose counters the allocator books).
// Slices keep their pool, generation and count, so a pool stays complete.
func candidates(slices []*resourceapi.ResourceSlice, state allocatedState, match func(string, *resourceapi.Device) bool) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, sl := range slices {
		cp := *sl
		cp.Spec.Devices = nil
		for j := range sl.Spec.Devices {
			d := &sl.Spec.Devices[j]
			id := structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name)
			_, shared := state.AggregatedCapacity[id]
			if state.AllocatedDevices.Has(id) || shared || match(sl.Spec.Driver, d) {
				cp.Spec.Devices = append(cp.Spec.Devices, *d)
			}
		}
		out = append(out, &cp)
	}
	return out
}
