// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// TaintedDevice is a device a request matches that would be free but for
// taints the request does not tolerate.
type TaintedDevice struct {
	Driver string `json:"driver"`
	Node   string `json:"node,omitempty"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// Taints are the NoSchedule and NoExecute taints the request does not
	// tolerate, as key=value:Effect.
	Taints []string `json:"taints"`
}

// TaintBlock is a request of a Pending pod's claim that device taints
// alone keep from the devices it matches.
type TaintBlock struct {
	// Claim is namespace/name; "" for the claim the scheduler would
	// create for the pod's extended resources (PodClaim "extended
	// resources").
	Claim    string
	PodClaim string
	Request  string
	// Devices are the tainted devices of the snapshot's driver that the
	// request matches.
	Devices []TaintedDevice
}

// TaintBlocked tells whether device taints alone keep a Pending pod from
// being scheduled: the pod's verdict (PodClaims.Verdict) finds a claim of
// the pod blocked with tainted devices of the snapshot's driver among those
// its requests match, and with those taints gone every claim of the pod
// would fit (the scheduler's allocator says so). It returns the verdict and
// the blocked requests; none when the pod is not blocked, when the tainted
// devices are another driver's, or when something else would still block
// it (the verdict then says what).
func TaintBlocked(s *Snapshot, namespace, name string) (*PodVerdict, []TaintBlock) {
	v, pod := podVerdict(s, namespace, name)
	r := &v
	if r.Status != Blocked || pod == nil || pod.Spec.NodeName != "" {
		return r, nil
	}
	var blocks []TaintBlock
	taints := map[string]bool{}
	for _, cr := range r.Claims {
		if cr.Allocated || cr.Status != Blocked {
			continue
		}
		for _, rq := range cr.Requests {
			if rq.Tainted == 0 || rq.enoughFree() {
				continue
			}
			b := TaintBlock{Claim: cr.Name, PodClaim: cr.PodClaim, Request: rq.Name}
			for _, d := range rq.TaintedDevices {
				if d.Driver != s.DriverName {
					continue
				}
				b.Devices = append(b.Devices, d)
				for _, t := range d.Taints {
					taints[t] = true
				}
			}
			if len(b.Devices) > 0 {
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) == 0 || !fitsWithout(s, namespace, name, taints) {
		return r, nil
	}
	return r, blocks
}

// fitsWithout analyses the pod again as if the driver's devices did not
// carry these taints (key=value:Effect), which is what tolerating them
// would do, and reports whether each of its claims would then fit.
func fitsWithout(s *Snapshot, namespace, name string, taints map[string]bool) bool {
	untainted := *s
	untainted.Slices = make([]resourceapi.ResourceSlice, len(s.Slices))
	for i := range s.Slices {
		sl := &s.Slices[i]
		untainted.Slices[i] = *sl
		if sl.Spec.Driver != s.DriverName || !carries(sl, taints) {
			continue
		}
		// The snapshot's objects may be an informer's cache: change a copy.
		cp := sl.DeepCopy()
		for j := range cp.Spec.Devices {
			d := &cp.Spec.Devices[j]
			d.Taints = slices.DeleteFunc(d.Taints, func(t resourceapi.DeviceTaint) bool { return taints[renderTaint(t)] })
		}
		untainted.Slices[i] = *cp
	}
	r, _ := podVerdict(&untainted, namespace, name)
	if r.Status == Blocked || len(r.Claims) == 0 {
		return false
	}
	for _, cr := range r.Claims {
		if !cr.Allocated && cr.Problem != "" {
			return false
		}
	}
	return true
}

func carries(sl *resourceapi.ResourceSlice, taints map[string]bool) bool {
	for _, d := range sl.Spec.Devices {
		for _, t := range d.Taints {
			if taints[renderTaint(t)] {
				return true
			}
		}
	}
	return false
}
