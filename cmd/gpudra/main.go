// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command gpudra is the operator's companion CLI. `gpudra demo` runs the
// whole driver offline on simulated GPUs: the scheduler's allocator picks
// devices for a few typical claims, the real plugin prepares them over its
// kubelet socket, and the nvidia-smi stand-in shows what each container
// would see. `gpudra smoke` runs the read-only checks of a real GPU host
// that `make gpu-smoke` (hack/gpu-smoke.sh) reports. `gpudra mig-packing`
// counts how well pod-by-pod allocation packs dynamic MIG devices
// (`make bench-packing`). `gpudra diagnose` explains a Pending or GPU-less
// pod, a claim, or a node (pkg/diagnose).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

func main() {
	sharing.RunStandInIfRequested() // the demo's simulated MPS daemons
	root := &cobra.Command{Use: "gpudra", Short: "Tools for the GPU DRA driver", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newDemoCommand(), newSmokeCommand(), newMigPackingCommand(), newDiagnoseCommand(), newSimulateRebootCommand())
	if err := root.Execute(); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
