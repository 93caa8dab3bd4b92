// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// DiagnosePod explains a pod's GPUs: why it is Pending, why it is stuck
// after scheduling, or which devices its containers got.
func DiagnosePod(s *Snapshot, namespace, name string) *Report {
	r := &Report{Target: "pod " + namespace + "/" + name, Unreadable: s.Unreadable}
	pod := s.pod(namespace, name)
	if pod == nil {
		r.Status, r.Verdict = Unknown, fmt.Sprintf("pod %s/%s not found", namespace, name)
		return r
	}
	c := published(s, "")
	r.IncompletePools = c.incompletePools()
	r.Pod = podInfo(s, pod)

	claims, missing := podClaims(s, pod)
	for _, cl := range claims {
		r.Claims = append(r.Claims, c.analyzeClaim(cl.claim, cl.podClaim, pod.Spec.NodeSelector))
	}
	if missing != "" {
		r.Status, r.Verdict = Blocked, fmt.Sprintf("pod %s is %s: %s", name, pod.Status.Phase, missing)
		return r
	}
	if len(claims) == 0 {
		return noGPU(r, pod)
	}
	switch {
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		r.Status, r.Verdict = OK, fmt.Sprintf("pod %s has ended (%s); its claims are released", name, pod.Status.Phase)
	case pod.Spec.NodeName == "":
		pendingVerdict(r, s, pod, claims)
	case pod.Status.Phase == corev1.PodRunning:
		runningVerdict(r, pod)
	default:
		c.prepareVerdict(r, pod)
	}
	return r
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
		claim := s.claim(pod.Namespace, claimName)
		if claim == nil {
			return out, fmt.Sprintf("its claim %q names ResourceClaim %s/%s, which does not exist; create it or fix resourceClaimName", pc.Name, pod.Namespace, claimName)
		}
		out = append(out, podClaim{podClaim: pc.Name, claim: claim})
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		if claim := s.claim(pod.Namespace, st.ResourceClaimName); claim != nil {
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

func podInfo(s *Snapshot, pod *corev1.Pod) *PodInfo {
	info := &PodInfo{Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName}
	for _, e := range s.eventsFor("Pod", pod.Namespace, pod.Name) {
		if e.Reason == "FailedScheduling" {
			info.Scheduler = e.Message
		}
	}
	states := map[string]string{}
	for _, st := range pod.Status.ContainerStatuses {
		switch {
		case st.State.Running != nil:
			states[st.Name] = "Running"
		case st.State.Waiting != nil:
			states[st.Name] = "Waiting: " + st.State.Waiting.Reason
		case st.State.Terminated != nil:
			states[st.Name] = "Terminated: " + st.State.Terminated.Reason
		}
	}
	for _, ctr := range pod.Spec.Containers {
		ci := ContainerInfo{Name: ctr.Name, State: states[ctr.Name]}
		if ci.State == "" {
			ci.State = "not started"
		}
		for _, rc := range ctr.Resources.Claims {
			n := rc.Name
			if rc.Request != "" {
				n += "/" + rc.Request
			}
			ci.Claims = append(ci.Claims, n)
		}
		for res := range ctr.Resources.Limits {
			if extendedResourceClass(s, string(res)) != "" {
				ci.Claims = append(ci.Claims, string(res))
			}
		}
		info.Containers = append(info.Containers, ci)
	}
	return info
}

func extendedResourceClass(s *Snapshot, res string) string {
	for _, dc := range s.DeviceClasses {
		if dc.Spec.ExtendedResourceName != nil && *dc.Spec.ExtendedResourceName == res {
			return dc.Name
		}
	}
	return ""
}

// noGPU explains a pod that asks for no device at all: on the host the
// GPU is visible, but a container gets only what a claim allocated.
func noGPU(r *Report, pod *corev1.Pod) *Report {
	if pod.Spec.NodeName == "" {
		r.Status = Unknown
		r.Verdict = fmt.Sprintf("pod %s is Pending but asks for no GPU (no ResourceClaim, no extended resource of a DeviceClass); the scheduler says: %s", pod.Name, orNone(r.Pod.Scheduler))
		return r
	}
	r.Status = Blocked
	r.Verdict = fmt.Sprintf("pod %s has no ResourceClaim and no extended resource of a DeviceClass (such as nvidia.com/gpu), so no GPU is given to its containers: the host's GPUs stay invisible to them. Add spec.resourceClaims and list the claim in each container's resources.claims", pod.Name)
	return r
}

// pendingVerdict explains a Pending pod: a claim that cannot be allocated,
// or else the scheduler's filters that keep the pod off each node.
func pendingVerdict(r *Report, s *Snapshot, pod *corev1.Pod, claims []podClaim) {
	name := pod.Name
	for _, cr := range r.Claims {
		if cr.Status == Blocked {
			claim := cr.Name
			if claim == "" {
				claim = "for " + cr.PodClaim
			}
			r.Status, r.Verdict = Blocked, fmt.Sprintf("pod %s is Pending: claim %s cannot be allocated: %s", name, claim, cr.Problem)
			return
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
	nodes, err := nodeFilters(s, pod, claims)
	if err != nil {
		filters = ", and the scheduler's filters could not be run on its nodes: " + err.Error()
	}
	r.Pod.Nodes = nodes
	if len(nodes) > 0 {
		blocked, text := filtersVerdict(nodes)
		if blocked {
			r.Status = Blocked
			r.Verdict = fmt.Sprintf("pod %s is Pending: its claims can be allocated (%s), but %s", name, strings.Join(fits, "; "), text)
			return
		}
		filters = ", and " + text
	}
	r.Status = Unknown
	r.Verdict = fmt.Sprintf("pod %s is Pending, but its GPUs are not what blocks it (%s)%s; the scheduler says: %s", name, strings.Join(fits, "; "), filters, orNone(r.Pod.Scheduler))
}

// runningVerdict names the devices of a running pod, and flags containers
// that list no claim: CDI injects a claim's devices only into containers
// that list it.
func runningVerdict(r *Report, pod *corev1.Pod) {
	var devs []string
	for _, cr := range r.Claims {
		devs = append(devs, fmt.Sprintf("%s from claim %s", strings.Join(cr.Devices, ", "), cr.Name))
	}
	var without []string
	for _, ci := range r.Pod.Containers {
		if len(ci.Claims) == 0 {
			without = append(without, ci.Name)
		}
	}
	if len(without) == len(r.Pod.Containers) {
		r.Status = Blocked
		r.Verdict = fmt.Sprintf("pod %s has claims (%s) but none of its containers lists one in resources.claims, so no container gets a GPU; add resources.claims: [{name: <pod claim name>}] to the containers that need it", pod.Name, strings.Join(devs, "; "))
		return
	}
	r.Status = OK
	r.Verdict = fmt.Sprintf("pod %s is Running on node %s with %s", pod.Name, pod.Spec.NodeName, strings.Join(devs, "; "))
	if len(without) > 0 {
		r.Verdict += fmt.Sprintf("; containers %s list no claim and see no GPU", strings.Join(without, ", "))
	}
}
