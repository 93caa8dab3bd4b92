// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package gpusmoke holds the steps of `gpudra smoke`, the read-only checks
// of a real GPU host without a cluster that `make gpu-smoke`
// (hack/gpu-smoke.sh) and hack/smoke-container.sh run: compare (the
// plugin's --print-slices output against nvidia-smi), prepare (one whole
// GPU through the in-process plugin, real NVML and nvcdi), container (a
// CUDA probe under runc from the claim's CDI spec, whole and under MPS)
// and the hidden mps-daemon child the container step starts.
package gpusmoke

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// driverName is the DRA driver the smoke steps' plugin runs as.
const driverName = "gpu.nvidia.com"

// The smoke checks print one line per check, "PASS|FAIL|SKIP<TAB>check<TAB>detail",
// which hack/gpu-smoke.sh gathers into its table.

type result struct {
	status, check, detail string
}

type report struct {
	out     io.Writer
	results []result
	// prefix names the step in front of each check, where a step repeats
	// another's checks (the container step prepares as prepare does).
	prefix string
}

func (r *report) add(status, check, format string, args ...any) {
	res := result{status, r.prefix + check, strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")}
	r.results = append(r.results, res)
	fmt.Fprintf(r.out, "%s\t%s\t%s\n", res.status, res.check, res.detail)
}
func (r *report) pass(check, f string, a ...any) { r.add("PASS", check, f, a...) }
func (r *report) fail(check, f string, a ...any) { r.add("FAIL", check, f, a...) }
func (r *report) skip(check, f string, a ...any) { r.add("SKIP", check, f, a...) }
func (r *report) check(ok bool, check, f string, a ...any) {
	if ok {
		r.pass(check, f, a...)
	} else {
		r.fail(check, f, a...)
	}
}

var errFailed = errors.New("some checks failed")

func (r *report) err() error {
	for _, res := range r.results {
		if res.status == "FAIL" {
			return errFailed
		}
	}
	return nil
}

// NewCommand is `gpudra smoke` with its steps.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Read-only checks of a GPU host without a cluster (make gpu-smoke runs them)",
	}
	cmd.AddCommand(newSmokeCompareCommand(), newSmokePrepareCommand(), newSmokeContainerCommand(), newSmokeMPSDaemonCommand())
	return cmd
}

// ---- compare: what --print-slices published against nvidia-smi ----

func newSmokeCompareCommand() *cobra.Command {
	var slicesFile, gpusFile, lgipFile string
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Compare the plugin's --print-slices output with nvidia-smi's view of the GPUs",
		Long: `--gpus is the output of
  nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id,driver_version --format=csv,noheader,nounits
and --mig-profiles, optional, that of "nvidia-smi mig -lgip".`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := &report{out: cmd.OutOrStdout()}
			smokeCompare(r, slicesFile, gpusFile, lgipFile)
			return r.err()
		},
	}
	cmd.Flags().StringVar(&slicesFile, "slices", "", "ResourceSlices YAML from gpu-kubelet-plugin --print-slices")
	cmd.Flags().StringVar(&gpusFile, "gpus", "", "nvidia-smi --query-gpu CSV")
	cmd.Flags().StringVar(&lgipFile, "mig-profiles", "", "nvidia-smi mig -lgip output")
	return cmd
}

// smiGPU is one line of nvidia-smi --query-gpu.
