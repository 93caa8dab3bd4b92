// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gpudra is the driver's development binary. `gpudra demo` runs the
// whole driver offline on simulated GPUs: the scheduler's allocator picks
// devices for a few typical claims, the real plugin prepares them over its
// kubelet socket, and the nvidia-smi stand-in shows what each container
// would see. `gpudra smoke` runs the read-only checks of a real GPU host
// that `make gpu-smoke` (hack/gpu-smoke.sh) reports. `gpudra mig-packing`
// counts how well pod-by-pod allocation packs dynamic MIG devices
// (`make bench-packing`). `gpudra simulate-reboot` stands in for a node's
// reboot in the e2e tests, `gpudra simulate-admin-mig` for an admin who
// partitions a GPU (static MIG).
//
// It also has the operator's commands, usage, capacity and diagnose, built
// from the same constructors (internal/opcmd) as cmd/kubectl-gpu, the
// kubectl plugin operators install: that binary links nothing of the node
// side (no driver, simulator, NVML mock or fake clientset), this one does.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/demo"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/gpusmoke"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/offlinenode"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/opcmd"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

func main() {
	sharing.RunStandInIfRequested() // the demo's simulated MPS daemons
	os.Exit(opcmd.Execute(newRoot(opcmd.DisplayName(os.Args[0])), os.Stderr))
}

func newRoot(prog string) *cobra.Command {
	root := opcmd.NewRoot(prog, "Development tools for the GPU DRA driver, and the operator's commands of kubectl-gpu")
	root.AddCommand(demo.NewCommand(), gpusmoke.NewCommand(), newMigPackingCommand(), offlinenode.NewRebootCommand(), offlinenode.NewAdminMigCommand())
	root.AddCommand(opcmd.Commands(prog)...)
	opcmd.AddVersion(root, prog)
	return root
}
