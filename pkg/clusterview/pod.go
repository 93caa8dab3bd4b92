// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// PodClaims is a pod's claims as the scheduler sees them.
type PodClaims struct {
	// IncompletePools are the pools the scheduler uses no device of.
	IncompletePools []string
	// Claims are the pod's claims that exist, each analysed.
	Claims []ClaimReport
	snap   *Snapshot
	pod    *corev1.Pod
	claims []podClaim
	// missing explains a claim of the pod that cannot exist.
	missing string
	// scheduler is the latest FailedScheduling message about the pod.
	scheduler string
}

// PodVerdict is what the scheduler's side says of a pod: a status, the
// sentence that explains it, and its evidence.
type PodVerdict struct {
	Status  Status
	Verdict string
	Claims  []ClaimReport
	// Nodes are, for a Pending pod whose claims can be allocated, the
	// scheduler's filters on each node (nodeFilters).
	Nodes []NodeFilter
}

// AnalyzePod resolves a pod's claims (named, from templates, and the claim
// for its extended resources) and analyses each (AnalyzeClaim), on the
// nodes the pod may use (podNodes).
func AnalyzePod(s *Snapshot, pod *corev1.Pod) *PodClaims {
	c := published(s, "")
	a := &PodClaims{IncompletePools: c.incompletePools(), snap: s, pod: pod, scheduler: s.SchedulerMessage(pod)}
	a.claims, a.missing = podClaims(s, pod)
	var allocated []*resourceapi.ResourceClaim
	for _, cl := range a.claims {
		if cl.claim.Status.Allocation != nil {
			allocated = append(allocated, cl.claim)
		}
	}
	nodes, all := c.podNodes(pod, allocated), c.candidateNodes(nil, nil)
	for _, cl := range a.claims {
		r := c.analyzeClaim(cl.claim, cl.podClaim, nodes)
		// A claim that fits only on nodes the pod may not use: what keeps
		// the pod Pending is those nodes' filters (a taint it does not
		// tolerate, say), which pending names from the analysis on every
		// node, not a selector to fix. The second pass costs what every
		// pass cost before the pod's nodes narrowed it, and only a
		// blocked claim pays it, where some excluded node has devices.
		if r.Status == Blocked && len(nodes) < len(all) && c.devicesOutside(nodes) {
			if w := c.analyzeClaim(cl.claim, cl.podClaim, all); w.Status != Blocked {
				r = w
			}
		}
		a.Claims = append(a.Claims, r)
	}
	return a
}

// devicesOutside reports whether a node not in nodes publishes a device.
func (c *cluster) devicesOutside(nodes []*corev1.Node) bool {
	in := map[string]bool{}
	for _, n := range nodes {
		in[n.Name] = true
	}
	for _, d := range c.devices {
		if d.Node != "" && !in[d.Node] {
			return true
		}
	}
	return false
}

// Verdict says what keeps the pod from running as far as the scheduler's
// side goes: a claim that cannot exist, no claim at all, an ended pod, or,
// for a pod no node has yet, why it is Pending. decided is false for a pod
// on a node with its claims: what happens there is the node's business.
func (a *PodClaims) Verdict() (v PodVerdict, decided bool) {
	pod := a.pod
	switch {
	case a.missing != "":
		return PodVerdict{Status: Blocked, Verdict: fmt.Sprintf("pod %s is %s: %s", pod.Name, pod.Status.Phase, a.missing), Claims: a.Claims}, true
	case len(a.claims) == 0:
		return a.noGPU(), true
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return PodVerdict{Status: OK, Verdict: fmt.Sprintf("pod %s has ended (%s); its claims are released", pod.Name, pod.Status.Phase), Claims: a.Claims}, true
	case pod.Spec.NodeName == "":
		return a.pending(), true
	}
	return PodVerdict{Claims: a.Claims}, false
}

// podVerdict is Verdict for a pod of the snapshot by name.
func podVerdict(s *Snapshot, namespace, name string) (v PodVerdict, pod *corev1.Pod) {
	if pod = s.Pod(namespace, name); pod == nil {
		return PodVerdict{Status: Unknown, Verdict: fmt.Sprintf("pod %s/%s not found", namespace, name)}, nil
	}
	v, _ = AnalyzePod(s, pod).Verdict()
	return v, pod
}

// SchedulerMessage is the latest FailedScheduling event's message about a
// pod ("" when none).
func (s *Snapshot) SchedulerMessage(pod *corev1.Pod) string {
	msg := ""
	for _, e := range s.EventsFor("Pod", pod.Namespace, pod.Name) {
		if e.Reason == "FailedScheduling" {
			msg = e.Message
		}
	}
	return msg
}

type podClaim struct {
	podClaim string
	claim    *resourceapi.ResourceClaim
}

// podClaims resolves the pod's claims (named, from templates, and the
// extended-resource claim). missing explains a claim that cannot exist.
func podClaims(s *Snapshot, pod *corev1.Pod) (out []podClaim, missing string) {
	for _, pc := range pod.Spec.ResourceClaims {
		var claimName string
		switch {
		case pc.ResourceClaimName != nil:
			claimName = *pc.ResourceClaimName
		case pc.ResourceClaimTemplateName != nil:
			for _, st := range pod.Status.ResourceClaimStatuses {
				if st.Name == pc.Name && st.ResourceClaimName != nil {
					claimName = *st.ResourceClaimName
				}
			}
			if claimName == "" {
				if s.template(pod.Namespace, *pc.ResourceClaimTemplateName) == nil {
					return out, fmt.Sprintf("its claim %q names ResourceClaimTemplate %s/%s, which does not exist; create it or fix resourceClaimTemplateName", pc.Name, pod.Namespace, *pc.ResourceClaimTemplateName)
				}
				return out, fmt.Sprintf("the ResourceClaim for its claim %q has not been created from template %s yet (is kube-controller-manager running?)", pc.Name, *pc.ResourceClaimTemplateName)
			}
		}
		claim := s.Claim(pod.Namespace, claimName)
		if claim == nil {
			return out, fmt.Sprintf("its claim %q names ResourceClaim %s/%s, which does not exist; create it or fix resourceClaimName", pc.Name, pod.Namespace, claimName)
		}
		out = append(out, podClaim{podClaim: pc.Name, claim: claim})
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		if claim := s.Claim(pod.Namespace, st.ResourceClaimName); claim != nil {
			out = append(out, podClaim{podClaim: "extended resources", claim: claim})
		}
	} else if claim := extendedResourceClaim(s, pod); claim != nil && pod.Spec.NodeName == "" {
		// Not scheduled yet: explain the claim the scheduler would create.
		// (A scheduled pod without one got the resource elsewhere, e.g.
		// from a device plugin.)
		out = append(out, podClaim{podClaim: "extended resources", claim: claim})
	}
	return out, ""
}

// noGPU explains a pod that asks for no device at all: on the host the
// GPU is visible, but a container gets only what a claim allocated.
func (a *PodClaims) noGPU() PodVerdict {
	r := PodVerdict{Claims: a.Claims}
	pod := a.pod
	if pod.Spec.NodeName == "" {
		r.Status = Unknown
		r.Verdict = fmt.Sprintf("pod %s is Pending but asks for no GPU (no ResourceClaim, no extended resource of a DeviceClass); the scheduler says: %s", pod.Name, orNone(a.scheduler))
		return r
	}
	r.Status = Blocked
	r.Verdict = fmt.Sprintf("pod %s has no ResourceClaim and no extended resource of a DeviceClass (such as nvidia.com/gpu), so no GPU is given to its containers: the host's GPUs stay invisible to them. Add spec.resourceClaims and list the claim in each container's resources.claims", pod.Name)
	return r
}

// pending explains a Pending pod: a claim that cannot be allocated, or
// else the scheduler's filters that keep the pod off each node.
func (a *PodClaims) pending() PodVerdict {
	r := PodVerdict{Claims: a.Claims}
	name := a.pod.Name
	for _, cr := range r.Claims {
		if cr.Status == Blocked {
			claim := cr.Name
			if claim == "" {
				claim = "for " + cr.PodClaim
			}
			r.Status, r.Verdict = Blocked, fmt.Sprintf("pod %s is Pending: claim %s cannot be allocated: %s", name, claim, cr.Problem)
			return r
		}
	}
	var fits []string
	for _, cr := range r.Claims {
		if cr.Allocated {
			fits = append(fits, fmt.Sprintf("claim %s is allocated on %s", cr.Name, cr.Node))
		} else {
			fits = append(fits, fmt.Sprintf("claim %s: %s", cr.Name, strings.TrimPrefix(cr.Allocator, "the scheduler's ")))
			if cr.Problem != "" {
				fits[len(fits)-1] = fmt.Sprintf("claim %s: %s", cr.Name, cr.Problem)
			}
		}
	}
	var filters string
	nodes, err := nodeFilters(a.snap, a.pod, a.claims)
	if err != nil {
		filters = ", and the scheduler's filters could not be run on its nodes: " + err.Error()
	}
	r.Nodes = nodes
	if len(nodes) > 0 {
		blocked, text := filtersVerdict(nodes)
		if blocked {
			r.Status = Blocked
			r.Verdict = fmt.Sprintf("pod %s is Pending: its claims can be allocated (%s), but %s", name, strings.Join(fits, "; "), text)
			return r
		}
		filters = ", and " + text
	}
	r.Status = Unknown
	r.Verdict = fmt.Sprintf("pod %s is Pending, but its GPUs are not what blocks it (%s)%s; the scheduler says: %s", name, strings.Join(fits, "; "), filters, orNone(a.scheduler))
	return r
}
