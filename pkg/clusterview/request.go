// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// analyzeRequest walks one exact request: published devices, the class's
// selectors, the request's selectors, then which of the matching devices
// are allocated, blocked by counters, out of capacity or tainted.
func (c *cluster) analyzeRequest(name string, req *resourceapi.ExactDeviceRequest, eligible func(node string) bool) RequestReport {
	r := RequestReport{Name: name, Class: req.DeviceClassName, Mode: string(req.AllocationMode), Count: req.Count,
		AdminAccess: ptr.Deref(req.AdminAccess, false)}
	if r.Mode == "" {
		r.Mode = string(resourceapi.DeviceAllocationModeExactCount)
	}
	if r.Mode == string(resourceapi.DeviceAllocationModeExactCount) && r.Count == 0 {
		r.Count = 1 // the apiserver's default
	}
	class := c.snap.class(req.DeviceClassName)
	if class == nil {
		return r
	}
	r.ClassFound = true
	var cur []*device
	for _, d := range c.devices {
		if eligible(d.Node) {
			cur = append(cur, d)
		}
	}
	r.Candidates = len(cur)
	classSels := compileSelectors("class "+class.Name, class.Spec.Selectors)
	sels := append(classSels, compileSelectors("request "+name, req.Selectors)...)
	var inClass []*device
	for i, s := range sels {
		if i == len(classSels) {
			inClass = cur
		}
		step := SelectorStep{Source: s.Source, Expression: s.Expression}
		var next []*device
		if s.compiled.Error != nil {
			step.Error = s.compiled.Error.Detail
			r.Error = fmt.Sprintf("%s selector %q does not compile: %s", s.Source, s.Expression, step.Error)
			r.Selectors = append(r.Selectors, step)
			return r
		}
		for _, d := range cur {
			ok, err := s.matches(c.devs, d)
			if err != nil {
				step.Error = fmt.Sprintf("device %s: %v", d.Dev.Name, err)
				r.Error = fmt.Sprintf("%s selector %q: %s", s.Source, s.Expression, step.Error)
				break
			}
			if ok {
				next = append(next, d)
			}
		}
		if step.Error == "" && len(next) == 0 && len(cur) > 0 {
			refs := references(s.Expression)
			step.Offered = map[string][]string{}
			for _, rf := range refs {
				step.Offered[rf.String()] = valueCounts(cur, rf, 5)
			}
			miss := c.nearMiss(cur, sels[i+1:])
			step.NearMiss = &NearMiss{Device: miss.Pool + "/" + miss.Dev.Name, Values: map[string]string{}}
			for _, rf := range refs {
				step.NearMiss.Values[rf.String()] = miss.value(rf)
			}
		}
		step.Left = len(next)
		r.Selectors = append(r.Selectors, step)
		if step.Error != "" {
			return r
		}
		cur = next
	}
	if len(classSels) == len(sels) {
		inClass = cur
	}
	r.Matching = len(cur)
	c.classify(&r, req, cur)
	if need := r.Count; r.Mode == string(resourceapi.DeviceAllocationModeExactCount) && int64(r.MaxFree) < need {
		r.FreeInClass = c.alternatives(inClass, req)
	}
	return r
}

// nearMiss picks, among devices that all fail one selector, the one that
// passes most of the selectors after it: the device closest to matching.
func (c *cluster) nearMiss(devs []*device, rest []selector) *device {
	best, bestScore := devs[0], -1
	for _, d := range devs {
		score := 0
		for _, s := range rest {
			if ok, err := s.matches(c.devs, d); err == nil && ok {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = d, score
		}
	}
	return best
}

// Why a matching device cannot be given to a request.
const (
	stateFree      = "free"
	stateAllocated = "allocated"
	stateCounters  = "counters"
	stateCapacity  = "capacity"
	stateTainted   = "tainted"
)

// state is why the allocator would not give a matching device to the
// request now, as the allocator answers it (fit.go): a device that fits is
// free, or tainted when the request does not tolerate its taints; one that
// does not is out of capacity when shareable, allocated when another claim
// holds it (and the request is not for admin access), otherwise blocked by
// shared counters. Admin access may get a device that other claims hold,
// but the allocator (1.37's and 1.38's alike) still checks and reserves
// the device's shared counters (kubernetes/kubernetes#140729): a device
// allocated whole, or one whose GPU runs MIG devices, stays
// counter-blocked for it.
func (c *cluster) state(d *device, req *resourceapi.ExactDeviceRequest) string {
	if !c.fits(d, req) {
		switch {
		case ptr.Deref(d.Dev.AllowMultipleAllocations, false):
			return stateCapacity
		case !ptr.Deref(req.AdminAccess, false) && len(c.holders[d.key()]) > 0:
			return stateAllocated
		}
		return stateCounters
	}
	// A shared GPU is tainted like any other device: the allocator skips
	// it for every new share.
	if untolerated(d.Dev.Taints, req.Tolerations) != "" {
		return stateTainted
	}
	return stateFree
}

// classify sorts matching devices into allocated, counter-blocked,
// capacity-full, tainted and free.
func (c *cluster) classify(r *RequestReport, req *resourceapi.ExactDeviceRequest, devs []*device) {
	holders := map[string]*HolderCount{}
	blocks := map[string]*CounterBlock{}
	taints := map[string]bool{}
	freeBy := map[string]int{}
	for _, d := range devs {
		switch c.state(d, req) {
		case stateFree:
			r.Free++
			freeBy[d.Node]++
		case stateCapacity:
			r.CapacityFull++
			addHolders(holders, d, c.holders[d.key()])
		case stateAllocated:
			r.Allocated++
			addHolders(holders, d, c.holders[d.key()])
		case stateCounters:
			r.CounterBlocked++
			by, set := c.blockersOf(d, req)
			k := d.Pool + "/" + set
			b := blocks[k]
			if b == nil {
				b = &CounterBlock{CounterSet: k, Node: d.Node}
				blocks[k] = b
			}
			b.Blocked++
			for _, key := range by {
				bd := c.byKey[key]
				if bd == nil {
					continue
				}
				if !contains(b.By, bd.Dev.Name) {
					b.By = append(b.By, bd.Dev.Name)
				}
				for _, h := range c.holders[key] {
					if o := h.owner(); !contains(b.Holders, o) {
						b.Holders = append(b.Holders, o)
					}
				}
				if bd.typ() == deviceattr.TypeGPU {
					b.WholeGPU = true
				}
			}
		case stateTainted:
			r.Tainted++
			taints[d.Dev.Name+": "+untolerated(d.Dev.Taints, req.Tolerations)] = true
			r.TaintedDevices = append(r.TaintedDevices, TaintedDevice{Driver: d.Driver, Node: d.Node, Pool: d.Pool, Device: d.Dev.Name,
				Taints: untoleratedAll(d.Dev.Taints, req.Tolerations)})
		}
	}
	for _, h := range holders {
		sort.Strings(h.Devices)
		r.Holders = append(r.Holders, *h)
	}
	sort.Slice(r.Holders, func(i, j int) bool { return r.Holders[i].Claim < r.Holders[j].Claim })
	for _, b := range blocks {
		sort.Strings(b.By)
		sort.Strings(b.Holders)
		r.CounterBlocks = append(r.CounterBlocks, *b)
	}
	sort.Slice(r.CounterBlocks, func(i, j int) bool { return r.CounterBlocks[i].CounterSet < r.CounterBlocks[j].CounterSet })
	for t := range taints {
		r.Taints = append(r.Taints, t)
	}
	sort.Strings(r.Taints)
	for n, f := range freeBy {
		if f > r.MaxFree || f == r.MaxFree && n < r.MaxFreeNode {
			r.MaxFree, r.MaxFreeNode = f, n
		}
	}
}

// alternatives lists, for the attributes the request's own selectors read,
// the values free devices of the class have now: "profile is "1g.10gb"
// (4)" tells a user what to ask for instead of waiting.
func (c *cluster) alternatives(inClass []*device, req *resourceapi.ExactDeviceRequest) map[string][]string {
	var free []*device
	for _, d := range inClass {
		if c.state(d, req) == stateFree {
			free = append(free, d)
		}
	}
	if len(free) == 0 {
		return nil
	}
	out := map[string][]string{}
	for _, s := range req.Selectors {
		if s.CEL == nil {
			continue
		}
		for _, rf := range references(s.CEL.Expression) {
			out[rf.String()] = valueCounts(free, rf, 4)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (h holder) owner() string {
	o := "claim " + h.Claim
	if len(h.Pods) > 0 {
		o += ", pod " + joinMax(h.Pods, 2)
	}
	return o
}

func addHolders(m map[string]*HolderCount, d *device, hs []holder) {
	for _, h := range hs {
		hc := m[h.Claim]
		if hc == nil {
			hc = &HolderCount{Claim: h.Claim, Pods: h.Pods}
			m[h.Claim] = hc
		}
		if !contains(hc.Devices, d.Dev.Name) {
			hc.Devices = append(hc.Devices, d.Dev.Name)
		}
	}
}

// sharedFull reports whether a shareable device has no room left for the
// smallest share its capacity policy allows, as the allocator answers it.
func (c *cluster) sharedFull(d *device) bool { return !c.fits(d, smallestShare(d)) }

// untolerated returns the first NoSchedule/NoExecute taint the request
// does not tolerate, rendered, or "".
func untolerated(taints []resourceapi.DeviceTaint, tols []resourceapi.DeviceToleration) string {
	if all := untoleratedAll(taints, tols); len(all) > 0 {
		return all[0]
	}
	return ""
}

// untoleratedAll returns every NoSchedule/NoExecute taint the request does
// not tolerate, rendered as key=value:Effect.
func untoleratedAll(taints []resourceapi.DeviceTaint, tols []resourceapi.DeviceToleration) []string {
	var out []string
	for _, t := range taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		tolerated := false
		for _, tol := range tols {
			if resourceclaim.ToleratesTaint(tol, t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			out = append(out, renderTaint(t))
		}
	}
	return out
}

func renderTaint(t resourceapi.DeviceTaint) string {
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinMax(list []string, n int) string {
	if len(list) <= n {
		return join(list)
	}
	return join(list[:n]) + fmt.Sprintf(" and %d more", len(list)-n)
}

func join(list []string) string { return strings.Join(list, ", ") }
