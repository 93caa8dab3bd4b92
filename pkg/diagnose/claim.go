// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// DiagnoseClaim explains one ResourceClaim: its allocation, or why the
// scheduler cannot allocate it.
func DiagnoseClaim(s *clusterview.Snapshot, namespace, name string) *Report {
	r := &Report{Target: "claim " + namespace + "/" + name, Unreadable: s.Unreadable}
	claim := s.Claim(namespace, name)
	if claim == nil {
		r.Status, r.Verdict = Blocked, fmt.Sprintf("ResourceClaim %s/%s does not exist", namespace, name)
		return r
	}
	cr, incomplete := clusterview.AnalyzeClaim(s, claim)
	r.IncompletePools = incomplete
	r.Claims = []clusterview.ClaimReport{cr}
	r.Status = cr.Status
	switch {
	case cr.Allocated:
		r.Verdict = fmt.Sprintf("claim %s is allocated on node %s: %s", cr.Name, orNone(cr.Node), strings.Join(cr.Devices, ", "))
	case cr.Status == Blocked:
		r.Verdict = fmt.Sprintf("claim %s cannot be allocated: %s", cr.Name, cr.Problem)
	default:
		// Not allocated yet, but it would fit: the scheduler allocates a
		// claim when it schedules the first pod that uses it.
		r.Status = OK
		r.Verdict = fmt.Sprintf("claim %s is not allocated yet; %s. The scheduler allocates it with the first pod that uses it", cr.Name, cr.Allocator)
	}
	return r
}
