// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
)

// problem returns why a request cannot be satisfied now, as a sentence a
// user can act on, or "" when enough devices are free.
func (c *cluster) problem(r RequestReport) string {
	switch {
	case !r.ClassFound:
		var names []string
		for _, dc := range c.snap.DeviceClasses {
			names = append(names, dc.Name)
		}
		sort.Strings(names)
		return fmt.Sprintf("request %q names DeviceClass %q, which does not exist (classes: %s); fix deviceClassName", r.Name, r.Class, orNone(strings.Join(names, ", ")))
	case r.Class == c.monitorClass() && !r.AdminAccess:
		return c.monitorWithoutAdmin(r)
	case r.Error != "":
		return fmt.Sprintf("request %q: the scheduler cannot evaluate %s; fix the expression", r.Name, r.Error)
	case r.Candidates == 0:
		msg := "no node publishes devices the pod may use"
		node := "NODE"
		if inc := c.incompletePools(); len(inc) > 0 {
			msg += " (" + strings.Join(inc, "; ") + "; the scheduler uses no device of an incomplete pool)"
			for _, p := range c.pools {
				if !p.Complete && p.Node != "" {
					node = p.Node
				}
			}
		}
		return msg + "; run `gpudra diagnose node " + node + "`"
	case r.Matching == 0:
		return r.selectorProblem()
	}
	need := r.need()
	if int64(r.Matching) < need {
		return fmt.Sprintf("request %q wants %d devices, but only %d published devices match it; ask for at most %d, or add GPUs", r.Name, need, r.Matching, r.Matching)
	}
	if r.enoughFree() {
		return ""
	}
	what := "device"
	if need != 1 {
		what = "devices"
	}
	if r.AdminAccess {
		what += " with admin access"
	}
	msg := fmt.Sprintf("request %q wants %d %s; %d of the %d matching devices are free", r.Name, need, what, r.Free, r.Matching)
	if r.Free > 0 && int64(r.MaxFree) < need {
		msg += fmt.Sprintf(", at most %d on one node (%s)", r.MaxFree, r.MaxFreeNode)
	}
	var why []string
	if r.Allocated > 0 {
		why = append(why, fmt.Sprintf("%d allocated to %s", r.Allocated, holderList(r.Holders)))
	}
	if r.CounterBlocked > 0 {
		why = append(why, counterSummary(r))
	}
	if r.CapacityFull > 0 {
		why = append(why, fmt.Sprintf("%d shared %s too little capacity left", r.CapacityFull, plural(r.CapacityFull, "GPU has", "GPUs have")))
	}
	if r.Tainted > 0 {
		why = append(why, fmt.Sprintf("%d tainted (%s)", r.Tainted, joinMax(r.Taints, 2)))
	}
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	}
	if r.adminCountersOnly() {
		return msg + ". " + c.adminCountersAdvice(r)
	}
	if len(r.FreeInClass) > 0 {
		return msg + fmt.Sprintf(". Free in class %s now: %s; ask for one of those, or wait for a device to be released", r.Class, strings.Join(entries(r.FreeInClass, "%s %s"), "; "))
	}
	return msg + ". Wait for a device to be released (delete a pod that holds one), or ask for fewer devices"
}

// need is how many of the matching devices the request wants.
func (r RequestReport) need() int64 {
	if r.Mode == string(resourceapi.DeviceAllocationModeAll) {
		return int64(r.Matching)
	}
	return r.Count
}

// enoughFree reports whether enough matching devices are free on one
// node (all of them, for allocation mode All).
func (r RequestReport) enoughFree() bool {
	return int64(r.MaxFree) >= r.need() && (r.Mode != string(resourceapi.DeviceAllocationModeAll) || r.Free == r.Matching)
}

// selectorProblem names the first selector that filtered everything out
// and what the devices offer instead.
func (r RequestReport) selectorProblem() string {
	for _, s := range r.Selectors {
		if s.Left != 0 {
			continue
		}
		before := r.Candidates
		for _, p := range r.Selectors {
			if p.Expression == s.Expression && p.Source == s.Source {
				break
			}
			before = p.Left
		}
		msg := fmt.Sprintf("no device matches request %q: %s selector `%s` rejects all %d devices", r.Name, s.Source, s.Expression, before)
		if s.Source != "request "+r.Name {
			msg = fmt.Sprintf("no device matches request %q: DeviceClass %q (%s) rejects all %d devices", r.Name, r.Class, "`"+s.Expression+"`", before)
		}
		if len(s.Offered) > 0 {
			msg += "; published " + strings.Join(entries(s.Offered, "%s is %s"), "; ")
		}
		return msg + ". Fix the selector to match a published value"
	}
	return fmt.Sprintf("no device matches request %q", r.Name)
}

// entries renders values by name, names sorted so that a verdict reads
// the same every time: format gets the name and its values joined by ", ".
func entries(m map[string][]string, format string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf(format, k, strings.Join(m[k], ", ")))
	}
	return out
}

func holderList(hs []HolderCount) string {
	var parts []string
	for _, h := range hs {
		p := h.Claim
		if len(h.Pods) > 0 {
			p += " (pod " + joinMax(h.Pods, 2) + ")"
		}
		parts = append(parts, p)
	}
	return joinMax(parts, 3)
}

// counterSummary says which GPUs' counters block matching placements:
// GPUs allocated whole, and placements overlapping allocated MIG devices.
func counterSummary(r RequestReport) string {
	whole, partial := 0, 0
	var wholeBy, partBy, wholeHolders, partHolders []string
	for _, b := range r.CounterBlocks {
		if b.WholeGPU {
			whole++
			wholeBy, wholeHolders = appendNew(wholeBy, b.By...), appendNew(wholeHolders, b.Holders...)
		} else {
			partial++
			partBy, partHolders = appendNew(partBy, b.By...), appendNew(partHolders, b.Holders...)
		}
	}
	var parts []string
	if whole > 0 {
		parts = append(parts, fmt.Sprintf("%d %s allocated whole (%s to %s)", whole, plural(whole, "GPU is", "GPUs are"), joinMax(wholeBy, 3), joinMax(wholeHolders, 2)))
	}
	if partial > 0 {
		parts = append(parts, fmt.Sprintf("%d %s these placements blocked by allocated MIG devices (%s of %s)", partial, plural(partial, "GPU has", "GPUs have"), joinMax(partBy, 3), joinMax(partHolders, 2)))
	}
	return fmt.Sprintf("%d blocked by partitionable counters: ", r.CounterBlocked) + strings.Join(parts, ", ")
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
