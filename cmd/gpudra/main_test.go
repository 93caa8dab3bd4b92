// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"slices"
	"testing"
)

// TestCommands: the development binary keeps its harnesses, which make,
// hack/ and the e2e tests run, and the operator's commands, which the e2e
// tests and test/scale run as gpudra.
func TestCommands(t *testing.T) {
	var names []string
	for _, c := range newRoot("gpudra").Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	if want := []string{"capacity", "demo", "diagnose", "mig-packing", "simulate-admin-mig", "simulate-reboot", "smoke", "usage", "version"}; !slices.Equal(names, want) {
		t.Errorf("commands %v, want %v", names, want)
	}
}
