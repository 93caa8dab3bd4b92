// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-gpu is the kubectl plugin `kubectl gpu` for operators
// (kubectl runs kubectl-gpu from the PATH): `kubectl gpu usage` shows the
// fleet's GPUs and who holds them, `kubectl gpu capacity` how many more
// claims of a kind fit, and `kubectl gpu diagnose` explains a Pending or
// GPU-less pod, a claim, or a node (pkg/fleetview, pkg/diagnose). It takes
// kubectl's flags (--kubeconfig, --context, -n, ...) and -o json|yaml.
//
// It links nothing of the node side: no driver, no prepare code, no GPU
// simulator, no NVML mock, no fake clientset (deps_test.go checks). The
// development harnesses (demo, smoke, mig-packing, simulate-reboot) are in
// cmd/gpudra.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/opcmd"
)

func main() {
	os.Exit(opcmd.Execute(newRoot(opcmd.DisplayName(os.Args[0])), os.Stderr))
}

func newRoot(prog string) *cobra.Command {
	root := opcmd.NewRoot(prog, "The GPU DRA driver's view of the fleet: usage, capacity, diagnose")
	root.AddCommand(opcmd.Commands(prog)...)
	opcmd.AddVersion(root, prog)
	return root
}
