// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package migpacking

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Orders is the number of arrival orders over all layouts.
func (r Report) Orders() int64 {
	var n int64
	for _, l := range r.Layouts {
		n += l.Orders
	}
	return n
}

// Fitted is the number of arrival orders allocated in full.
func (r Report) Fitted() int64 {
	var n int64
	for _, l := range r.Layouts {
		n += l.Fitted
	}
	return n
}

// Percent is the share of arrival orders allocated in full.
func (r Report) Percent() float64 {
	if r.Orders() == 0 {
		return 0
	}
	return 100 * float64(r.Fitted()) / float64(r.Orders())
}

// Worst returns up to n layouts with the smallest share of arrival orders
// allocated in full (those allocated in every order left out), most
// orders lost first among equal shares.
func (r Report) Worst(n int) []Layout {
	var out []Layout
	for _, l := range r.Layouts {
		if l.Fitted < l.Orders {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b Layout) int {
		// a.Fitted/a.Orders vs b.Fitted/b.Orders without rounding.
		return cmp.Or(
			cmp.Compare(a.Fitted*b.Orders, b.Fitted*a.Orders),
			cmp.Compare(b.Orders-b.Fitted, a.Orders-a.Fitted),
		)
	})
	return out[:min(n, len(out))]
}

// String names the layout's devices, e.g. "3g.40gb + 2g.20gb + 2 x 1g.10gb".
func (l Layout) String() string {
	var parts []string
	for i := 0; i < len(l.Profiles); {
		j := i
		for j < len(l.Profiles) && l.Profiles[j] == l.Profiles[i] {
			j++
		}
		if j-i == 1 {
			parts = append(parts, l.Profiles[i])
		} else {
			parts = append(parts, fmt.Sprintf("%d x %s", j-i, l.Profiles[i]))
		}
		i = j
	}
	// Largest profiles first reads like nvidia-smi's layouts.
	slices.Reverse(parts)
	return strings.Join(parts, " + ")
}

// Print writes the summary line and the worst layouts.
func (r Report) Print(w io.Writer, worst int) {
	fmt.Fprintf(w, "%-10s %-9s  %3d layouts  %5d / %5d arrival orders allocated in full (%.1f%%), %d allocations\n",
		r.Model, r.Order, len(r.Layouts), r.Fitted(), r.Orders(), r.Percent(), r.Allocations)
	for _, l := range r.Worst(worst) {
		fmt.Fprintf(w, "    %4d / %4d  %s\n", l.Fitted, l.Orders, l)
	}
}
