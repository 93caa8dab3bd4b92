// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestEveryPublishedDeviceIsPreparable prepares, one claim at a time, every
// device a node publishes (whole GPUs, each dynamic MIG placement, shareable
// GPUs, an admin-partitioned GPU's static MIG devices), and checks that a
// device the node does not publish is refused by name. The slices and the
// prepare state come from one device table; this proves they agree.
func TestEveryPublishedDeviceIsPreparable(t *testing.T) {
	for _, tc := range []struct {
		profile    string
		dynamicMIG bool
		fractional bool
		notOffered string
	}{
		{"h100x1", true, false, "gpu-1"},
		{"a100-80gbx1:mig", true, false, "gpu-0"}, // MIG on, no reset allowed: no whole GPU
		{"a30x1", false, false, "gpu-0-mig-1g6gb-14-0"},
		{"h100x2", false, true, "gpu-0-mig-1g10gb-19-0"},
	} {
		t.Run(fmt.Sprintf("%s/dynamicMIG=%v/fractional=%v", tc.profile, tc.dynamicMIG, tc.fractional), func(t *testing.T) {
			n := newNodeWith(t, tc.profile, tc.dynamicMIG)
			if tc.fractional {
				n.fractional = true
				n.restart(tc.profile)
			}
			var names []string
			for _, s := range n.publishedSlices() {
				for _, d := range s.Spec.Devices {
					names = append(names, d.Name)
				}
			}
			if len(names) == 0 {
				t.Fatal("nothing published")
			}
			for i, name := range names {
				c := n.claim(fmt.Sprintf("c%d", i), []string{name})
				if strings.HasSuffix(name, "-monitor") {
					// Monitor devices are for admin access only.
					if e := n.prepare(c)[string(c.UID)].GetError(); !strings.Contains(e, "admin") {
						t.Fatalf("%s without admin access: %q, want a refusal", name, e)
					}
					c = n.adminClaim(fmt.Sprintf("admin%d", i), []string{name})
				}
				if ids := n.mustPrepare(c); len(ids) == 0 {
					t.Fatalf("%s: prepared without a CDI device", name)
				}
				n.unprepare(c)
			}
			bad := n.claim("not-offered", []string{tc.notOffered})
			if e := n.prepare(bad)["uid-not-offered"].GetError(); !strings.Contains(e, tc.notOffered) {
				t.Fatalf("a device the node does not publish (%s) was not refused by name: %q", tc.notOffered, e)
			}
			if files := n.checkpointFiles(); len(files) != 0 {
				t.Fatalf("records left after unprepare: %v", files)
			}
		})
	}
}

// TestPreviewShowsWhatTheNodePublishes: --print-slices on a live node's
// state dir builds the same table as the running plugin, including GPUs
// that stay dynamically partitioned because the checkpoint holds MIG
// devices the plugin created there.
func TestPreviewShowsWhatTheNodePublishes(t *testing.T) {
	n := newMigNode(t, "h100x1")
	n.mustPrepare(n.claim("mig", []string{"gpu-0-mig-1g10gb-19-0"}))
	var published []string
	for _, s := range n.publishedSlices() {
		for _, d := range s.Spec.Devices {
			published = append(published, d.Name)
		}
	}
	_, inv, err := simulate.Discover("h100x1", testNode, filepath.Join(n.dir("state"), "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	opts := resourceslices.Options{DynamicMIG: true}
	preview, err := PreviewDeviceTable(inv, opts, n.dir("state"))
	if err != nil {
		t.Fatal(err)
	}
	if got := entryNames(preview); !slices.Equal(got, published) {
		t.Fatalf("preview %v\npublished %v", got, published)
	}
	// Without the checkpoint the MIG device would be taken for an admin's
	// static layout: that is what the preview must not show.
	if blind := entryNames(resourceslices.NewTable(inv, opts)); slices.Equal(blind, published) {
		t.Fatalf("the test does not exercise the checkpoint: %v", blind)
	}
}

func entryNames(t resourceslices.Table) []string {
	var out []string
	for _, e := range t.Entries {
		out = append(out, e.Device.Name)
	}
	return out
}
