// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package versiontest holds the one check every binary's --version test
// makes, so that the four commands agree on what "prints the build" means.
package versiontest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// RequirePrintsBuild runs a fresh command from newCommand with each set of
// arguments and fails t unless it succeeds and prints the build
// (pkg/version), doing nothing else.
func RequirePrintsBuild(t *testing.T, newCommand func() *cobra.Command, argSets ...[]string) {
	t.Helper()
	want := version.Get().String()
	for _, args := range argSets {
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("%v printed %q, want the build %q", args, out.String(), want)
		}
	}
}
