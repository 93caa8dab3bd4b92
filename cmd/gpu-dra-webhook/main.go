// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gpu-dra-webhook is the validating admission webhook of the GPU DRA
// driver, and with its pending-explainer subcommand the chart's explainer of
// Pending pods that only device taints block: flags -> config -> run, all in
// internal/webhookcmd.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/webhookcmd"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command { return webhookcmd.NewCommand() }
