// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// TestVersionFlag: --version prints the build (pkg/version) and runs nothing else.
func TestVersionFlag(t *testing.T) {
	for _, a := range [][]string{{"--version"}} {
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(a)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if !strings.Contains(out.String(), version.Get().String()) {
			t.Errorf("%v printed %q, want the build %q", a, out.String(), version.Get().String())
		}
	}
}
