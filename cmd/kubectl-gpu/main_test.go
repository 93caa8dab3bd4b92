// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/opcmd"
)

// TestCommands: the plugin has the operator's commands and none of the
// development harnesses, and its help speaks of `kubectl gpu`.
func TestCommands(t *testing.T) {
	root := newRoot(opcmd.DisplayName("/usr/local/bin/kubectl-gpu"))
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	if want := []string{"capacity", "diagnose", "usage", "version"}; !slices.Equal(names, want) {
		t.Errorf("commands %v, want %v", names, want)
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"capacity", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage:\n  kubectl gpu capacity (", "kubectl gpu capacity --mig-profile 1g.10gb", "--kubeconfig string", "-n, --namespace string"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
