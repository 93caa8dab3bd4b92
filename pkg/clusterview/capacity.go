// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
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
	return CapacityOf(ctx, s, []*resourceapi.ResourceClaim{claim}, limit)
}

// CapacityOf is Capacity for a pod's claims together: a copy of the pod
// fits a node when the allocator allocates all of them there at once, as
// the scheduler's DynamicResources filter does. claims must not be empty.
func CapacityOf(ctx context.Context, s *Snapshot, claims []*resourceapi.ResourceClaim, limit int) ([]NodeCapacity, error) {
	if len(claims) == 0 {
		return nil, fmt.Errorf("capacity: no claim to count")
	}
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

	probes := make([]*resourceapi.ResourceClaim, len(claims))
	matchers := make([]func(string, *resourceapi.Device) bool, len(claims))
	var counted []*resourceapi.ResourceSlice
	for _, n := range nodes {
		counted = append(counted, nodeSlices[n]...)
	}
	// Built on the first selector whose result is not kept (requestMatcher).
	devs := sync.OnceValue(func() *allocator.Devices { return allocator.NewDevices(counted) })
	for i, claim := range claims {
		probes[i] = claim.DeepCopy()
		probes[i].Status = resourceapi.ResourceClaimStatus{}
		m, err := s.requestMatcher(probes[i], devs)
		if err != nil {
			return nil, err
		}
		matchers[i] = m
	}
	match := func(driver string, d *resourceapi.Device) bool {
		for _, m := range matchers {
			if m(driver, d) {
				return true
			}
		}
		return false
	}
	out := make([]NodeCapacity, len(nodes))
	errs := make([]error, len(nodes))
	work := make(chan int)
	var wg sync.WaitGroup
	var memo sync.Map // signature -> *nodeCount
	for range min(runtime.GOMAXPROCS(0), len(nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i], errs[i] = s.nodeCapacity(ctx, nodes[i], nodeSlices[nodes[i]], nodeAllocs[nodes[i]], poolNode, probes, match, limit, &memo)
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
	poolNode map[string]string, probes []*resourceapi.ResourceClaim, match func(driver string, d *resourceapi.Device) bool, limit int, memo *sync.Map) (NodeCapacity, error) {
	node := s.Node(name)
	if node == nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	}
	state := allocator.NewState()
	onNode := func(driver, pool string) bool { return poolNode[driver+"/"+pool] == name }
	for _, a := range allocs {
		state.Hold(a, onNode)
	}
	slices = candidates(slices, state, match)
	// Nodes alike in what they publish and what is allocated on them
	// (a fleet's idle nodes of one model, typically) take the same
	// number: count once.
	key := name
	if memoize {
		key = signature(slices, state, !namesUUID(probes))
	}
	entry, _ := memo.LoadOrStore(key, &nodeCount{})
	nc := entry.(*nodeCount)
	nc.once.Do(func() { nc.NodeCapacity, nc.err = count(ctx, s, node, slices, state, probes, limit) })
	return NodeCapacity{Node: name, Count: nc.Count, AtLimit: nc.AtLimit}, nc.err
}

// memoize is off in the benchmark of a fleet whose nodes all differ.
var memoize = true

type nodeCount struct {
	once sync.Once
	NodeCapacity
	err error
}

// count allocates copies of probes on one node until they do not fit.
func count(ctx context.Context, s *Snapshot, node *corev1.Node, slices []*resourceapi.ResourceSlice, state *allocator.State, probes []*resourceapi.ResourceClaim, limit int) (NodeCapacity, error) {
	name := node.Name
	nc := NodeCapacity{Node: name}
	converted, err := allocator.ConvertSlices(slices)
	if err != nil {
		return nc, err
	}
	for nc.Count < limit {
		if err := ctx.Err(); err != nil {
			return nc, err
		}
		// A new allocator each round: the allocator may cache what it
		// derived from the allocated state, which each round changes.
		alloc, err := allocator.New(ctx, classLister{s}, state, converted, celCache)
		if err != nil {
			return nc, err
		}
		res, err := alloc.Allocate(ctx, node, probes)
		if err != nil {
			return nc, fmt.Errorf("node %s: %w", name, err)
		}
		if len(res) == 0 {
			return nc, nil
		}
		for i := range res {
			state.Hold(&res[i], nil)
		}
		nc.Count++
	}
	nc.AtLimit = true
	return nc, nil
}

// candidates narrows a node's slices to the devices that may match the
// claim and those already allocated (whose counters the allocator books).
// Slices keep their pool, generation and count, so a pool stays complete.
func candidates(slices []*resourceapi.ResourceSlice, state *allocator.State, match func(string, *resourceapi.Device) bool) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, 0, len(slices))
	for _, sl := range slices {
		cp := *sl
		cp.Spec.Devices = nil
		for j := range sl.Spec.Devices {
			d := &sl.Spec.Devices[j]
			if state.Has(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name) || match(sl.Spec.Driver, d) {
				cp.Spec.Devices = append(cp.Spec.Devices, *d)
			}
		}
		out = append(out, &cp)
	}
	return out
}

// signature identifies what a node's count depends on: its candidate
// slices without the node's and pool's names, and which of their devices
// are allocated or shared out, and how much. Equal signatures give the
// allocator the same problem.
//
// GPU UUIDs differ from node to node, so they are replaced by their order
// of appearance on the node: a constraint matchAttribute on parentUUID
// compares them only with each other. A claim whose selectors name a UUID
// (renamed false) keeps them.
func signature(slices []*resourceapi.ResourceSlice, state *allocator.State, rename bool) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	uuids := map[string]string{}
	for _, sl := range slices {
		spec := sl.Spec
		spec.NodeName, spec.Pool.Name = nil, ""
		if rename {
			spec.Devices = make([]resourceapi.Device, len(sl.Spec.Devices))
			for j, d := range sl.Spec.Devices {
				d.Attributes = maps.Clone(d.Attributes)
				for name, a := range d.Attributes {
					if id := name[strings.LastIndex(string(name), "/")+1:]; (id == deviceattr.AttrUUID || id == deviceattr.AttrParentUUID) && a.StringValue != nil {
						if _, ok := uuids[*a.StringValue]; !ok {
							uuids[*a.StringValue] = fmt.Sprintf("uuid-%d", len(uuids))
						}
						v := uuids[*a.StringValue]
						d.Attributes[name] = resourceapi.DeviceAttribute{StringValue: &v}
					}
				}
				spec.Devices[j] = d
			}
		}
		_ = enc.Encode(&spec) // plain API types: no error
		for _, d := range sl.Spec.Devices {
			if state.Taken(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name) {
				fmt.Fprintf(h, "allocated %s\n", d.Name)
			}
			if used := state.Consumed(sl.Spec.Driver, sl.Spec.Pool.Name, d.Name); used != nil {
				names := make([]string, 0, len(used))
				for n := range used {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					q := used[n]
					fmt.Fprintf(h, "shared %s %s %s\n", d.Name, n, q.String())
				}
			}
		}
	}
	return string(h.Sum(nil))
}

// namesUUID reports whether some claim's selectors mention a UUID attribute.
func namesUUID(claims []*resourceapi.ResourceClaim) bool {
	for _, claim := range claims {
		if claimNamesUUID(claim) {
			return true
		}
	}
	return false
}

func claimNamesUUID(claim *resourceapi.ResourceClaim) bool {
	for _, r := range claim.Spec.Devices.Requests {
		var sels []resourceapi.DeviceSelector
		if r.Exactly != nil {
			sels = r.Exactly.Selectors
		}
		for _, sub := range r.FirstAvailable {
			sels = append(sels, sub.Selectors...)
		}
		for _, sel := range sels {
			if sel.CEL != nil && strings.Contains(strings.ToLower(sel.CEL.Expression), "uuid") {
				return true
			}
		}
	}
	return false
}
