// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/migpacking"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/node"
)

func newMigPackingCommand() *cobra.Command {
	var models []string
	var order string
	var worst, maxDevices int
	cmd := &cobra.Command{
		Use:   "mig-packing",
		Short: "Count how many arrival orders of MIG layouts pod-by-pod allocation fits, per GPU model (make bench-packing)",
		Long: `For one simulated GPU of each model, every multiset of MIG profiles that fits
the GPU in a single claim is allocated in every distinct arrival order, one
claim per device, with the scheduler's structured allocator over the slices
the plugin publishes. Printed per model: the arrival orders allocated in full
and the layouts that lose the most. --order ascending measures NVML's
ascending placement order (the order before issue 11), both measures both.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var orders []migpacking.Order
			switch order {
			case "both":
				orders = []migpacking.Order{migpacking.Ascending, migpacking.Published}
			case string(migpacking.Published), string(migpacking.Ascending):
				orders = []migpacking.Order{migpacking.Order(order)}
			default:
				return fmt.Errorf("--order %q: want published, ascending or both", order)
			}
			if worst < 0 || maxDevices < 0 {
				return fmt.Errorf("--worst and --max-devices must not be negative")
			}
			return migPacking(cmd.OutOrStdout(), models, orders, migpacking.Options{MaxDevices: maxDevices}, worst)
		},
	}
	cmd.Flags().StringSliceVar(&models, "model", migpacking.Models, "simulated GPU models")
	cmd.Flags().StringVar(&order, "order", "both", "published, ascending or both")
	cmd.Flags().IntVar(&worst, "worst", 5, "layouts to list per model, fewest arrival orders allocated in full first")
	cmd.Flags().IntVar(&maxDevices, "max-devices", 0, "only layouts of at most this many devices (0: all)")
	return cmd
}

func migPacking(w io.Writer, models []string, orders []migpacking.Order, o migpacking.Options, worst int) (err error) {
	// The allocator's failures end the run with an error.
	failures := &node.Recorder{}
	defer failures.Recover(&err)
	summary := map[string]map[migpacking.Order]migpacking.Report{}
	for _, model := range models {
		summary[model] = map[migpacking.Order]migpacking.Report{}
		for _, order := range orders {
			o.Order = order
			start := time.Now()
			r, err := migpacking.Run(failures, model, o)
			if err != nil {
				return err
			}
			r.Print(w, worst)
			fmt.Fprintf(w, "    (%s)\n", time.Since(start).Round(time.Millisecond))
			summary[model][order] = r
		}
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| model | layouts | arrival orders |")
	for _, order := range orders {
		fmt.Fprintf(w, " fitted, %s |", order)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---|---|")
	for range orders {
		fmt.Fprint(w, "---|")
	}
	fmt.Fprintln(w)
	for _, model := range models {
		first := summary[model][orders[0]]
		fmt.Fprintf(w, "| %s (%s) | %d | %d |", model, first.Product, len(first.Layouts), first.Orders())
		for _, order := range orders {
			r := summary[model][order]
			fmt.Fprintf(w, " %d (%.1f%%) |", r.Fitted(), r.Percent())
		}
		fmt.Fprintln(w)
	}
	return nil
}
