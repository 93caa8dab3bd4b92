// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gpu-kubelet-plugin is the node plugin of the GPU DRA driver:
// flags -> config -> run, all in internal/plugincmd.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/plugincmd"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

func main() {
	// The simulated MPS control daemon is this binary re-run.
	sharing.RunStandInIfRequested()
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command { return plugincmd.NewCommand() }
