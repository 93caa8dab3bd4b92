// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Totals counts GPUs by use, for one model or one node.
type Totals struct {
	GPUs     int `json:"gpus"`
	Free     int `json:"free"`
	Whole    int `json:"whole"`
	MIG      int `json:"mig"`
	Shared   int `json:"shared"`
	Fraction int `json:"fraction"`
	// Passthrough GPUs are bound to vfio-pci for a virtual machine.
	Passthrough int `json:"passthrough"`
	// Tainted GPUs are counted under their use as well.
	Tainted int `json:"tainted"`
}

func (t *Totals) add(g *GPU) {
	t.GPUs++
	switch g.Use {
	case Free:
		t.Free++
	case Whole:
		t.Whole++
	case MIG:
		t.MIG++
	case Shared:
		t.Shared++
	case Fraction:
		t.Fraction++
	case Passthrough:
		t.Passthrough++
	}
	if len(g.Taints) > 0 {
		t.Tainted++
	}
}

// Report is `gpudra usage -o json`.
type Report struct {
	GPUs    []GPU             `json:"gpus"`
	ByModel map[string]Totals `json:"byModel"`
	ByNode  map[string]Totals `json:"byNode"`
	Total   Totals            `json:"total"`
}

// NewReport adds the totals to a usage listing.
func NewReport(gpus []GPU) *Report {
	r := &Report{GPUs: gpus, ByModel: map[string]Totals{}, ByNode: map[string]Totals{}}
	for i := range gpus {
		g := &gpus[i]
		m, n := r.ByModel[g.Model], r.ByNode[g.Node]
		m.add(g)
		n.add(g)
		r.ByModel[g.Model], r.ByNode[g.Node] = m, n
		r.Total.add(g)
	}
	return r
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// writeJSON is both reports' -o json.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteTable writes one row per GPU, then the totals per model and per
// node. wide adds the GPU's UUID and each holder's claim and device.
func (r *Report) WriteTable(w io.Writer, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NODE\tGPU\tMODEL\tMEMORY\tHEALTH\tUSAGE"
	if wide {
		head = "NODE\tGPU\tUUID\tMODEL\tMEMORY\tHEALTH\tUSAGE\tCLAIMS"
	}
	fmt.Fprintln(tw, head)
	for i := range r.GPUs {
		g := &r.GPUs[i]
		health := "ok"
		if len(g.Taints) > 0 {
			health = "tainted " + strings.Join(g.Taints, ",")
		}
		index := "?"
		if g.Index >= 0 {
			index = fmt.Sprint(g.Index)
		}
		cols := []string{g.Node, index, g.Model, memString(g.MemoryBytes), health, usageCell(g)}
		if wide {
			cols = []string{g.Node, index, orDash(g.UUID), g.Model, memString(g.MemoryBytes), health, usageCell(g), claimsCell(g)}
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.GPUs) == 0 {
		_, err := fmt.Fprintln(w, "no GPUs published by the driver (or none matches the filter)")
		return err
	}
	fmt.Fprintln(w)
	writeTotals(tw, "MODEL", r.ByModel)
	fmt.Fprintln(w)
	writeTotals(tw, "NODE", r.ByNode)
	return nil
}

func writeTotals(tw *tabwriter.Writer, what string, m map[string]Totals) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(tw, "%s\tGPUS\tFREE\tWHOLE\tMIG\tSHARED\tFRACTION\tPASSTHROUGH\tTAINTED\n", what)
	for _, k := range keys {
		t := m[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", orDash(k), t.GPUs, t.Free, t.Whole, t.MIG, t.Shared, t.Fraction, t.Passthrough, t.Tainted)
	}
	_ = tw.Flush()
}

// usageCell says how a GPU is used in one line.
func usageCell(g *GPU) string {
	var s string
	switch g.Use {
	case Free:
		s = "free"
	case Whole:
		s = "whole " + g.Holders[0].Owner()
	case Shared:
		s = sharedCell(g)
	case MIG:
		s = migCell(g)
	case Fraction:
		s = fractionCell(g)
	case Passthrough:
		s = "passthrough (vfio-pci) " + g.Holders[0].Owner()
	}
	if len(g.Monitors) > 0 {
		s += "; monitored by " + strings.Join(g.Monitors, ",")
	}
	return s
}

// sharedCell: "shared time-slicing Long: 1 claim, 2 pods: a/p1,a/p2".
func sharedCell(g *GPU) string {
	claims, pods, modes := map[string]bool{}, []string{}, []string{}
	for _, h := range g.Holders {
		if !claims[h.Claim] {
			claims[h.Claim] = true
			pods = append(pods, h.Owner())
		}
		if h.Sharing != "" {
			modes = appendNew(modes, h.Sharing)
		}
	}
	mode := ""
	if len(modes) > 0 {
		mode = " " + strings.Join(modes, ",")
	}
	return fmt.Sprintf("shared%s: %s, %s", mode, plural(len(claims), "claim"), strings.Join(pods, ","))
}

// migCell draws the GPU's memory slices, one character each: a letter per
// MIG device (a, b, ...), "." for a free slice, then what each letter is:
// "mig [aaaabbc.] a=3g.40gb ns/pod b=2g.20gb ns/pod c=1g.10gb ns/pod; 1/8 slices free".
func migCell(g *GPU) string {
	slices := g.MigSlices
	for _, h := range g.Holders {
		slices = max(slices, h.Start+h.Size)
	}
	bar := []byte(strings.Repeat(".", slices))
	var legend []string
	for i, h := range g.Holders {
		c := byte('a' + i%26)
		for s := h.Start; s < h.Start+h.Size && s < slices; s++ {
			bar[s] = c
		}
		legend = append(legend, fmt.Sprintf("%c=%s %s", c, h.Profile, h.Owner()))
	}
	free := strings.Count(string(bar), ".")
	return fmt.Sprintf("mig [%s] %s; %d/%d slices free", bar, strings.Join(legend, " "), free, slices)
}

// fractionCell: "fraction 40Gi/80Gi: a/p1 20Gi 50%, b/p2 20Gi".
func fractionCell(g *GPU) string {
	var shares []string
	for _, h := range g.Holders {
		s := h.Owner() + " " + memString(h.MemoryBytes)
		if h.Compute > 0 {
			s += fmt.Sprintf(" %d%%", h.Compute)
		}
		shares = append(shares, s)
	}
	return fmt.Sprintf("fraction %s/%s used: %s", memString(g.FractionUsedBytes), memString(g.MemoryBytes), strings.Join(shares, ", "))
}

// claimsCell lists claim=device for -o wide.
func claimsCell(g *GPU) string {
	var out []string
	for _, h := range g.Holders {
		out = append(out, h.Claim+"="+h.Device)
	}
	return orDash(strings.Join(out, ","))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
