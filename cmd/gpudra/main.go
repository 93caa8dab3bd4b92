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
// pod, a claim, or a node (pkg/diagnose). `gpudra usage` and `gpudra
// capacity` show the fleet's GPUs and how many more claims of a kind fit
// (pkg/fleetview). Installed as kubectl-gpu, the binary is the kubectl
// plugin `kubectl gpu` with the same commands.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

func main() {
	sharing.RunStandInIfRequested() // the demo's simulated MPS daemons
	root := &cobra.Command{Use: "gpudra", Short: "Tools for the GPU DRA driver", SilenceUsage: true, SilenceErrors: true,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: displayName(os.Args[0])}}
	root.AddCommand(newDemoCommand(), newSmokeCommand(), newMigPackingCommand(), newDiagnoseCommand(), newSimulateRebootCommand(),
		newUsageCommand(), newCapacityCommand())
	if err := root.Execute(); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

// displayName is how help calls the command: kubectl runs a plugin named
// kubectl-gpu for `kubectl gpu`, so under that name the usage lines say
// "kubectl gpu usage" (kubectl's plugin name rules: dashes separate words).
func displayName(argv0 string) string {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	if rest, ok := strings.CutPrefix(base, "kubectl-"); ok {
		return "kubectl " + strings.ReplaceAll(rest, "-", " ")
	}
	return "gpudra"
}
