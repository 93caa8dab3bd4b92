// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/versiontest"
)

// TestVersionFlag: --version and `version --client` print the build (pkg/version) and runs nothing else.
func TestVersionFlag(t *testing.T) {
	versiontest.RequirePrintsBuild(t, func() *cobra.Command { return newRoot("gpudra") }, []string{"--version"}, []string{"version", "--client"})
}
