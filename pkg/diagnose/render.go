// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// WriteJSON writes the report for tools.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the verdict first, then the evidence.
func (r *Report) WriteText(w io.Writer) error {
	p := &printer{w: w}
	p.line(0, "%s: %s", strings.ToUpper(string(r.Status)), r.Target)
	p.line(0, "%s", r.Verdict)
	if pi := r.Pod; pi != nil {
		p.blank()
		p.line(0, "Pod: %s, node %s", pi.Phase, orNone(pi.Node))
		if pi.Scheduler != "" {
			p.line(1, "scheduler: %s", pi.Scheduler)
		}
		for _, c := range pi.Containers {
			p.line(1, "container %s: %s; claims: %s", c.Name, c.State, orNone(strings.Join(c.Claims, ", ")))
		}
		for i, n := range pi.Nodes {
			if i == maxNodeLines {
				p.line(1, "and %d more nodes (-o json lists each)", len(pi.Nodes)-i)
				break
			}
			if n.StoppedBy == nil {
				p.line(1, "node %s: passes the scheduler's filters", n.Node)
			} else {
				p.line(1, "node %s: %s", n.Node, n.StoppedBy)
			}
		}
	}
	for _, c := range r.Claims {
		p.blank()
		p.claim(c)
	}
	if pr := r.Prepare; pr != nil {
		p.blank()
		p.line(0, "Prepare on node %s:", pr.Node)
		p.line(1, "plugin pod: %s (%s)", orNone(pr.PluginPod), pr.PluginState)
		p.line(1, "registered with the kubelet: %s", pr.Registered)
		if pr.Step != "" {
			p.line(1, "failed step: %s", pr.Step)
		}
		for _, e := range pr.Events {
			p.line(1, "event %s", e)
		}
		for _, m := range pr.Metrics {
			p.line(1, "metric %s", m)
		}
	}
	if n := r.Node; n != nil {
		p.blank()
		p.node(n)
	}
	if len(r.IncompletePools) > 0 {
		p.blank()
		p.line(0, "Incomplete pools (the scheduler skips them):")
		for _, s := range r.IncompletePools {
			p.line(1, "%s", s)
		}
	}
	if len(r.Unreadable) > 0 {
		p.blank()
		p.line(0, "Could not read:")
		for _, s := range r.Unreadable {
			p.line(1, "%s", s)
		}
	}
	return p.err
}

func (p *printer) claim(c clusterview.ClaimReport) {
	name := c.Name
	if name == "" {
		name = "(not created yet)"
	}
	if c.PodClaim != "" {
		name += " (pod claim " + c.PodClaim + ")"
	}
	if c.Allocated {
		p.line(0, "Claim %s: allocated on node %s: %s", name, orNone(c.Node), strings.Join(c.Devices, ", "))
		if len(c.ReservedFor) > 0 {
			p.line(1, "reserved for %s", strings.Join(c.ReservedFor, ", "))
		}
		for _, d := range c.DeviceInfo {
			p.line(1, "device status %s", d)
		}
		return
	}
	p.line(0, "Claim %s: not allocated", name)
	for _, r := range c.Requests {
		p.request(r)
	}
	if c.Allocator != "" {
		p.line(1, "%s", c.Allocator)
	}
}

func (p *printer) request(r clusterview.RequestReport) {
	count := fmt.Sprint(r.Count)
	if r.Mode == "All" {
		count = "all"
	}
	if !r.ClassFound {
		p.line(1, "request %s: DeviceClass %s NOT FOUND", r.Name, r.Class)
		return
	}
	admin := ""
	if r.AdminAccess {
		admin = ", admin access"
	}
	p.line(1, "request %s: %s device(s) of class %s%s", r.Name, count, r.Class, admin)
	p.line(2, "%d devices published in complete pools on nodes the pod may use", r.Candidates)
	for _, s := range r.Selectors {
		p.line(2, "%s `%s`: %d left", s.Source, s.Expression, s.Left)
		if s.Error != "" {
			p.line(3, "error: %s", s.Error)
		}
		keys := make([]string, 0, len(s.Offered))
		for k := range s.Offered {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p.line(3, "published %s: %s", k, strings.Join(s.Offered[k], ", "))
		}
		if m := s.NearMiss; m != nil {
			var vals []string
			for k, v := range m.Values {
				vals = append(vals, k+" = "+v)
			}
			sort.Strings(vals)
			p.line(3, "near miss %s: %s", m.Device, orNone(strings.Join(vals, ", ")))
		}
	}
	if r.Error != "" {
		return
	}
	p.line(2, "%d match: %d allocated, %d blocked by counters, %d shared without capacity left, %d tainted, %d free (at most %d on one node%s)",
		r.Matching, r.Allocated, r.CounterBlocked, r.CapacityFull, r.Tainted, r.Free, r.MaxFree, paren(r.MaxFreeNode))
	for _, h := range r.Holders {
		pods := ""
		if len(h.Pods) > 0 {
			pods = ", pods " + strings.Join(h.Pods, ", ")
		}
		p.line(3, "held by claim %s%s: %s", h.Claim, pods, joinMax(h.Devices, 8))
	}
	for _, b := range r.CounterBlocks {
		p.line(3, "counter set %s: %d placements blocked by %s (%s)", b.CounterSet, b.Blocked, joinMax(b.By, 4), joinMax(b.Holders, 2))
	}
	for _, t := range r.Taints {
		p.line(3, "taint %s", t)
	}
	keys := make([]string, 0, len(r.FreeInClass))
	for k := range r.FreeInClass {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.line(2, "free in class %s now: %s %s", r.Class, k, strings.Join(r.FreeInClass[k], ", "))
	}
}

func (p *printer) node(n *NodeReport) {
	p.line(0, "Node %s (Ready: %s)", n.Name, n.Ready)
	if len(n.PluginPods) == 0 {
		p.line(1, "plugin pod: none")
	}
	for _, s := range n.PluginPods {
		p.line(1, "plugin pod %s", s)
	}
	p.line(1, "registered with the kubelet: %s", n.Registered)
	if n.Simulated != "" {
		p.line(1, "simulated GPUs: %s", n.Simulated)
	}
	for _, s := range n.Pools {
		p.line(1, "%s", s)
	}
	d := n.Devices
	p.line(1, "devices: %d published, %d allocated, %d blocked by counters, %d tainted, %d free", d.Total, d.Allocated, d.CounterBlocked, d.Tainted, d.Free)
	for _, t := range n.ByType {
		p.line(2, "type %s: %d published, %d allocated, %d blocked by counters, %d tainted, %d free", orNone(t.Type), t.Total, t.Allocated, t.CounterBlocked, t.Tainted, t.Free)
	}
	for _, c := range n.Claims {
		state := "allocated"
		if c.Prepared {
			state = "prepared (device status written)"
		}
		p.line(1, "claim %s: %s, %s, pods %s", c.Claim, strings.Join(c.Devices, ", "), state, orNone(strings.Join(c.Pods, ", ")))
	}
	for _, m := range n.Metrics {
		p.line(1, "metric %s", m)
	}
	for _, e := range n.Events {
		p.line(1, "event %s", e)
	}
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(indent int, format string, args ...any) {
	if p.err != nil {
		return
	}
	_, p.err = fmt.Fprintf(p.w, "%s%s\n", strings.Repeat("  ", indent), fmt.Sprintf(format, args...))
}

func (p *printer) blank() {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w)
	}
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

// maxNodeLines is how many nodes' filters the text output lists.
const maxNodeLines = 20

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func joinMax(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:n], ", ") + fmt.Sprintf(" and %d more", len(list)-n)
}
