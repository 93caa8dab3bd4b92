// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"bytes"
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
)

// TestCapacity counts on the demo fleet of TestUsage: n1's MIG GPU has
// three free memory slices and its other GPUs are taken; n2 has one
// healthy free A100 (the other is tainted) and no dynamic MIG.
func TestCapacity(t *testing.T) {
	s := demoFleet(t)
	pair := schedtest.Claim("pair", schedtest.Request("a", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"),
		schedtest.Request("b", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))
	s.ClaimTemplates = []resourceapi.ResourceClaimTemplate{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pair"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: pair.Spec}}}
	for _, c := range []struct {
		req         Request
		node        string
		n1, n2, all int
	}{
		{req: Request{MigProfile: "1g.10gb"}, n1: 3, n2: 0, all: 3},
		{req: Request{MigProfile: "1g.10gb", Count: 2}, n1: 1, n2: 0, all: 1},
		{req: Request{Template: "team-a/pair"}, n1: 1, n2: 0, all: 1},
		{req: Request{MigProfile: "3g.40gb"}, n1: 0, n2: 0, all: 0},
		// The tainted A100 does not count; the shareable H100 with shares
		// taken cannot be had whole.
		{req: Request{Class: "gpu.nvidia.com"}, n1: 0, n2: 1, all: 1},
		{req: Request{Class: "gpu.nvidia.com"}, node: "n2", n2: 1, all: 1},
	} {
		rep, err := Capacity(context.Background(), s, c.req, c.node, 100)
		if err != nil {
			t.Errorf("%s: %v", c.req, err)
			continue
		}
		got := map[string]int{}
		for _, n := range rep.Nodes {
			got[n.Node] = n.Count
		}
		if got["n1"] != c.n1 || got["n2"] != c.n2 || rep.Total != c.all || c.node != "" && len(rep.Nodes) != 1 {
			t.Errorf("%s (node %q): %+v total %d, want n1 %d n2 %d total %d", c.req, c.node, rep.Nodes, rep.Total, c.n1, c.n2, c.all)
		}
	}

	rep, err := Capacity(context.Background(), s, Request{MigProfile: "1g.10gb"}, "", 2)
	if err != nil || rep.Total != 2 || !rep.AtLimit {
		t.Fatalf("limit 2: %+v %v, want a total of 2 marked as a floor", rep, err)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out, false); err != nil {
		t.Fatal(err)
	}
	if want := "n1    2+ (stopped at the limit)\n(1 of 2 nodes take none; -o wide lists them)\nTOTAL: at least 2 more claims for 1 MIG device(s) of profile 1g.10gb fit now (2 nodes counted)\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("table:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

// TestCapacityErrors: bad input names the flag and the fix.
func TestCapacityErrors(t *testing.T) {
	s := demoFleet(t)
	for _, c := range []struct {
		req  Request
		node string
		want []string
	}{
		{Request{MigProfile: "9g.1tb"}, "", []string{"--mig-profile 9g.1tb", "published: 1g.10gb", "3g.40gb"}},
		{Request{Class: "nope"}, "", []string{"--class nope: no such DeviceClass", "gpu.nvidia.com, mig.nvidia.com"}},
		{Request{Template: "team-a/missing"}, "", []string{"--template team-a/missing", "kubectl get resourceclaimtemplates -n team-a"}},
		{Request{Template: "missing"}, "", []string{"expected NAMESPACE/NAME"}},
		{Request{Class: "gpu.nvidia.com", MigProfile: "1g.10gb"}, "", []string{"exactly one of"}},
		{Request{}, "", []string{"exactly one of"}},
		{Request{Template: "a/b", Count: 2}, "", []string{"--count 2"}},
		{Request{Class: "gpu.nvidia.com"}, "n9", []string{"--node n9"}},
	} {
		_, err := Capacity(context.Background(), s, c.req, c.node, 10)
		if err == nil {
			t.Errorf("%+v: no error", c.req)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", c.req, err, w)
			}
		}
	}
}

// With the chart's per-profile classes installed, --mig-profile asks for
// the profile's class (one CEL expression per device, as users claim MIG
// devices) and counts what the MIG class with a selector counts.
func TestCapacityUsesTheProfileClass(t *testing.T) {
	s := demoFleet(t)
	class := static.MigProfileClass(driver, "1g.10gb")
	s.DeviceClasses = append(s.DeviceClasses, *class)
	claim, err := Probe(s, Request{MigProfile: "1g.10gb"})
	if err != nil {
		t.Fatal(err)
	}
	if r := claim.Spec.Devices.Requests[0].Exactly; r.DeviceClassName != class.Name || len(r.Selectors) != 0 {
		t.Fatalf("request %+v, want class %s and no selector", r, class.Name)
	}
	rep, err := Capacity(context.Background(), s, Request{MigProfile: "1g.10gb"}, "", 100)
	if err != nil || rep.Total != 3 {
		t.Fatalf("capacity %+v %v, want 3 as with the MIG class and a selector", rep, err)
	}
}
