// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/podfit"
)

type classLister struct{ s *Snapshot }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l.s.DeviceClasses))
	for i := range l.s.DeviceClasses {
		out = append(out, &l.s.DeviceClasses[i])
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc := l.s.class(name); dc != nil {
		return dc, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// allocate runs the scheduler's structured allocator for one claim on
// each node the pod may use, with every other claim's allocation in place,
// and returns the first node where it fits ("" when none).
func (c *cluster) allocate(claim *resourceapi.ResourceClaim, nodes []*corev1.Node) (string, error) {
	state := allocator.NewState()
	for i := range c.snap.Claims {
		other := &c.snap.Claims[i]
		if other.Status.Allocation == nil || other.UID == claim.UID && claim.UID != "" {
			continue
		}
		state.Hold(other.Status.Allocation, nil)
	}
	all := make([]*resourceapi.ResourceSlice, 0, len(c.snap.Slices))
	for i := range c.snap.Slices {
		all = append(all, &c.snap.Slices[i])
	}
	slices, err := allocator.ConvertSlices(all)
	if err != nil {
		return "", err
	}
	alloc, err := allocator.New(context.Background(), classLister{c.snap}, state, slices, celCache)
	if err != nil {
		return "", err
	}
	pending := claim.DeepCopy()
	pending.Status = resourceapi.ResourceClaimStatus{}
	for _, n := range nodes {
		res, err := alloc.Allocate(context.Background(), n, []*resourceapi.ResourceClaim{pending})
		if err != nil {
			return "", err
		}
		if len(res) > 0 {
			return n.Name, nil
		}
	}
	return "", nil
}

// candidateNodes are the nodes pod may be scheduled to as far as the
// scheduler's filters that read the pod and the node alone say
// (podfit.Static: NodeUnschedulable, TaintToleration and NodeAffinity, the
// last for spec.nodeSelector and required node affinity both); every node
// for a claim on its own (pod nil). Devices on the other nodes are no
// option for the pod, so they are neither counted nor suggested to it.
// A claim of the pod that is allocated already (shared with a running
// pod) narrows them further to the nodes its allocation reaches, as the
// scheduler's DynamicResources filter does: the pod's other claims can
// only be met there. Nodes that publish slices but have no Node object in
// the snapshot are stood in for by their name and hostname label: nothing
// shows them cordoned or tainted, so they stay candidates but for a
// selector or affinity on labels they do not show, as before.
func (c *cluster) candidateNodes(pod *corev1.Pod, allocated []*resourceapi.ResourceClaim) []*corev1.Node {
	may := func(n *corev1.Node) bool {
		if pod == nil {
			return true
		}
		// An affinity that does not evaluate is no match, as the
		// scheduler's NodeAffinity filter takes it.
		rej, err := podfit.Static(pod, n)
		return err == nil && rej == nil && podfit.AllocatedClaimsOn(allocated, n) == nil
	}
	var out []*corev1.Node
	seen := map[string]bool{}
	for i := range c.snap.Nodes {
		n := &c.snap.Nodes[i]
		seen[n.Name] = true
		if may(n) {
			out = append(out, n)
		}
	}
	var extra []string
	for _, p := range c.pools {
		if p.Node != "" && !seen[p.Node] {
			seen[p.Node] = true
			extra = append(extra, p.Node)
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		if may(n) {
			out = append(out, n)
		}
	}
	return out
}

// podNodes are the nodes whose devices pod's claims are analysed on:
// candidateNodes, unless the pod may use no node that publishes a device.
// Then its node filters keep it Pending, not its claims: the claims are
// analysed on every node, as a claim on its own is, and pending names the
// filter that stops the pod on each node.
func (c *cluster) podNodes(pod *corev1.Pod, allocated []*resourceapi.ResourceClaim) []*corev1.Node {
	nodes := c.candidateNodes(pod, allocated)
	names := map[string]bool{"": true} // a device of no one node is reachable from every node
	for _, n := range nodes {
		names[n.Name] = true
	}
	for _, d := range c.devices {
		if names[d.Node] {
			return nodes
		}
	}
	return c.candidateNodes(nil, nil)
}

// constraintProblem is called when every request has enough free devices
// on its own but the allocator finds no node for the claim: it retries
// without each matchAttribute constraint to name the one that no device
// combination satisfies.
func (c *cluster) constraintProblem(claim *resourceapi.ResourceClaim, nodes []*corev1.Node) string {
	cons := claim.Spec.Devices.Constraints
	for i, con := range cons {
		if con.MatchAttribute == nil {
			continue
		}
		relaxed := claim.DeepCopy()
		relaxed.Spec.Devices.Constraints = append(append([]resourceapi.DeviceConstraint{}, cons[:i]...), cons[i+1:]...)
		if node, err := c.allocate(relaxed, nodes); err == nil && node != "" {
			reqs := con.Requests
			if len(reqs) == 0 {
				reqs = []string{"all requests"}
			}
			return fmt.Sprintf("constraint matchAttribute %s over %s: no combination of free devices shares one value of it (without it the claim would fit on node %s); free devices on one GPU or PCIe root, or drop the constraint",
				*con.MatchAttribute, strings.Join(reqs, ", "), node)
		}
	}
	return ""
}
