// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// templateSlices are what --print-slices gives benchscale for 8 x H100.
func templateSlices(t *testing.T, o resourceslices.Options) []*resourceapi.ResourceSlice {
	_, inv, err := simulate.Discover("h100x8", templateNode, filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*resourceapi.ResourceSlice
	for i, s := range resourceslices.Objects("gpu.nvidia.com", templateNode, resourceslices.Build(templateNode, inv, o)) {
		s.Name = fmt.Sprintf("%s%d", s.GenerateName, i)
		out = append(out, &s)
	}
	return out
}

func TestPlanFillCountsWhatANodeHolds(t *testing.T) {
	classes := schedtest.ShippedDeviceClasses(t)
	classes = append(classes, static.MigProfileClass("gpu.nvidia.com", "1g.10gb"))
	all := map[string]layout{}
	for _, l := range layouts() {
		all[l.name] = l
	}
	for _, tc := range []struct {
		layout string
		opts   resourceslices.Options
		want   int
	}{
		{"whole", resourceslices.Options{}, 8},
		{"mig-1g", resourceslices.Options{DynamicMIG: true}, 56},
		{"mig-1g-class", resourceslices.Options{DynamicMIG: true}, 56},
		{"mig-whole", resourceslices.Options{DynamicMIG: true}, 8},
		{"frac-20gi", resourceslices.Options{FractionalMemory: true}, 32},
	} {
		f, err := planFill(templateSlices(t, tc.opts), classes, all[tc.layout])
		if err != nil {
			t.Fatalf("%s: %v", tc.layout, err)
		}
		if f.capacity() != tc.want {
			t.Errorf("%s: a node holds %d claims, want %d", tc.layout, f.capacity(), tc.want)
		}
		if got := f.held(90); got != tc.want*9/10 {
			t.Errorf("%s: 90%% is %d claims", tc.layout, got)
		}
	}
}

// A template allocation moved to a node names that node's pool and
// selects that node, and the template is left as it was.
func TestForNodeRenamesPoolAndNode(t *testing.T) {
	f, err := planFill(templateSlices(t, resourceslices.Options{DynamicMIG: true}), schedtest.ShippedDeviceClasses(t), layouts()[1])
	if err != nil {
		t.Fatal(err)
	}
	r := forNode(f.results[0], nodeName(7))
	if got := r.Devices.Results[0].Pool; got != nodeName(7) {
		t.Errorf("pool %q, want %q", got, nodeName(7))
	}
	if f.results[0].Devices.Results[0].Pool != templateNode {
		t.Error("the template allocation was changed")
	}
	sel := r.NodeSelector.NodeSelectorTerms[0]
	found := false
	for _, m := range append(sel.MatchFields, sel.MatchExpressions...) {
		for _, v := range m.Values {
			if v == nodeName(7) {
				found = true
			}
			if v == templateNode {
				t.Errorf("node selector still names the template node: %+v", sel)
			}
		}
	}
	if !found {
		t.Errorf("node selector %+v does not select %s", sel, nodeName(7))
	}
}

func TestTimedPodsLeaveTheFillLevel(t *testing.T) {
	for _, tc := range []struct{ n, ppn, free, want int }{
		{500, 1, 8, 500}, // empty whole-GPU nodes: one pod each
		{500, 1, 1, 250}, // 90% of 8 GPUs: every other node's last GPU
		{500, 1, 6, 500}, // 90% of 56 MIG slots: one of six free each
		{500, 4, 4, 1000},
		{1, 1, 1, 1},
	} {
		if got := timedPods(tc.n, tc.ppn, tc.free); got != tc.want {
			t.Errorf("timedPods(%d, %d, %d) = %d, want %d", tc.n, tc.ppn, tc.free, got, tc.want)
		}
	}
}
