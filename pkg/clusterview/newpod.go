// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// NewPodClaims are the claims one more copy of a pod would use.
type NewPodClaims struct {
	// PerPod are allocated afresh for each copy: one claim per
	// resourceClaimTemplateName (kube-controller-manager creates it from
	// the template), the claim the scheduler creates for extended
	// resources that a DeviceClass maps (nvidia.com/gpu), and a named
	// claim not allocated yet (counted as if each copy had its own: an
	// overcount's opposite, a claim shared by every copy is rare).
	PerPod []*resourceapi.ResourceClaim
	// Allocated are named claims already allocated: every copy shares
	// them, and a node takes copies only where their allocation is
	// available (the scheduler's "resourceclaim not available on the node").
	Allocated []*resourceapi.ResourceClaim
}

// ClaimsOfNewPod resolves a pod template's claims against the snapshot's
// claim templates, claims and DeviceClasses. The error names the pod's
// claim and what is missing.
func ClaimsOfNewPod(s *Snapshot, pod *corev1.Pod) (NewPodClaims, error) {
	var out NewPodClaims
	for _, pc := range pod.Spec.ResourceClaims {
		switch {
		case pc.ResourceClaimTemplateName != nil:
			t := s.template(pod.Namespace, *pc.ResourceClaimTemplateName)
			if t == nil {
				return out, fmt.Errorf("pod claim %q: ResourceClaimTemplate %s/%s does not exist; create it or fix resourceClaimTemplateName", pc.Name, pod.Namespace, *pc.ResourceClaimTemplateName)
			}
			c := &resourceapi.ResourceClaim{Spec: *t.Spec.Spec.DeepCopy()}
			c.Namespace, c.Name = pod.Namespace, pod.Name+"-"+pc.Name
			out.PerPod = append(out.PerPod, c)
		case pc.ResourceClaimName != nil:
			c := s.Claim(pod.Namespace, *pc.ResourceClaimName)
			if c == nil {
				return out, fmt.Errorf("pod claim %q: ResourceClaim %s/%s does not exist; create it or fix resourceClaimName", pc.Name, pod.Namespace, *pc.ResourceClaimName)
			}
			if c.Status.Allocation != nil {
				out.Allocated = append(out.Allocated, c)
			} else {
				out.PerPod = append(out.PerPod, c.DeepCopy())
			}
		default:
			return out, fmt.Errorf("pod claim %q: names neither resourceClaimName nor resourceClaimTemplateName", pc.Name)
		}
	}
	if c := extendedResourceClaim(s, pod); c != nil {
		c.Name = pod.Name + "-extended-resources"
		out.PerPod = append(out.PerPod, c)
	}
	return out, nil
}

// ExtendedResourceClass is the DeviceClass whose extendedResourceName is
// res ("" when none): the scheduler allocates such a resource through DRA.
func ExtendedResourceClass(s *Snapshot, res string) string { return extendedResourceClass(s, res) }

func extendedResourceClass(s *Snapshot, res string) string {
	for _, dc := range s.DeviceClasses {
		if dc.Spec.ExtendedResourceName != nil && *dc.Spec.ExtendedResourceName == res {
			return dc.Name
		}
	}
	return ""
}
