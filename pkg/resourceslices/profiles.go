// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"slices"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// The scheduler pays, on every node it filters and for every pod, for each
// device the node publishes (the 1.37 allocator converted and validated all
// of them in each Filter call; 1.38's converts them once per slice change
// and still walks them in each call), and dynamic MIG publishes 25 placements
// per H100 besides the GPU itself. Options.MigProfiles lets a fleet that
// uses a few profiles publish only those; docs/performance.md has what it
// saves.

// dynamicProfiles returns the profiles of g whose placements are offered
// for dynamic MIG, in the GPU's order: every profile when MigProfiles is
// empty, else those it lists (exact names) and those the checkpoint holds
// devices of; with DynamicMIG off, only those the checkpoint holds devices
// of (a GPU whose dynamic MIG devices claims still hold stays dynamic until
// they are unprepared). Only dynamic MIG is limited; an admin's MIG devices
// exist and are always published.
func (o Options) dynamicProfiles(g *nvdev.GPU) []nvdev.MigProfile {
	if len(o.MigProfiles) == 0 && o.DynamicMIG {
		return g.MigProfiles
	}
	var out []nvdev.MigProfile
	for _, p := range g.MigProfiles {
		if (o.DynamicMIG && slices.Contains(o.MigProfiles, p.Name)) || slices.Contains(o.HeldMigProfiles[g.UUID], p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// MigProfileNames returns the MIG profiles the GPUs of inv have, sorted,
// each once: what --mig-profiles could list on this node.
func MigProfileNames(inv *nvdev.Inventory) []string {
	var names []string
	for _, g := range inv.GPUs {
		for _, p := range g.MigProfiles {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// AbsentMigProfiles returns the names of listed that no GPU of inv has.
// One list serves a mixed fleet (an A100-40GB's 1g.5gb beside an H100's
// 1g.10gb), so an absent name is no error, but it may be a typo.
func AbsentMigProfiles(inv *nvdev.Inventory, listed []string) []string {
	have := MigProfileNames(inv)
	var absent []string
	for _, name := range listed {
		if _, found := slices.BinarySearch(have, name); !found && !slices.Contains(absent, name) {
			absent = append(absent, name)
		}
	}
	return absent
}
