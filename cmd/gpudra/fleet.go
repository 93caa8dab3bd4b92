// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/diagnose"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/fleetview"
)

// fleetOptions are the flags usage and capacity share with diagnose:
// how to reach the cluster, or a state recorded by `diagnose --dump`.
type fleetOptions struct {
	kubeconfig, context, driverName, from, output, node string
	timeout                                             time.Duration
}

func (o *fleetOptions) flags(cmd *cobra.Command, outputs string) {
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context")
	f.StringVar(&o.driverName, "driver-name", "gpu.nvidia.com", "the driver's name (chart value driverName)")
	f.StringVar(&o.from, "from", "", "read a state written by 'gpudra diagnose --dump' instead of a cluster")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "time limit for reading the cluster")
	f.StringVarP(&o.output, "output", "o", "", "output format: "+outputs)
	f.StringVar(&o.node, "node", "", "only this node")
}

// fleetMemoryLimit is the Go heap's soft limit for usage and capacity
// (unless GOMEMLIMIT says otherwise): at 500 dynamic-MIG nodes the slices
// alone are ~0.5 GiB, and by default the heap may grow to twice what is
// live before a collection; the limit collects sooner, to stay under 1 GiB.
const fleetMemoryLimit = 700 << 20

func (o *fleetOptions) snapshot(ctx context.Context, template string) (*diagnose.Snapshot, error) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(fleetMemoryLimit)
	}
	if o.from != "" {
		snap, err := readSnapshot(o.from)
		if err != nil {
			return nil, err
		}
		if snap.DriverName == "" {
			snap.DriverName = o.driverName
		}
		return snap, nil
	}
	cs, err := clientFor(o.kubeconfig, o.context, o.timeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	return fleetview.Gather(ctx, cs, o.driverName, template)
}

func newUsageCommand() *cobra.Command {
	o := &fleetOptions{}
	var namespace string
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "One row per GPU of the fleet: free, whole, MIG slices, shared or memory fractions, and who holds it",
		Long: `usage lists every GPU the driver publishes, with its node, index, model,
memory and health (device taints), and how it is used: free; whole (the pods
holding it); MIG, drawn as the GPU's memory slices, one letter per MIG device
and "." per free slice, with each device's profile and pods; shared
(time-slicing or MPS, or one claim used by several pods); or memory fractions
(used and total, each share's pods). Totals per model and per node follow.
It reads ResourceSlices, ResourceClaims, DeviceTaintRules and DeviceClasses
with a few List calls.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "" && o.output != "wide" && o.output != "json" {
				return fmt.Errorf("--output %q: use wide or json, or leave it out for the table", o.output)
			}
			snap, err := o.snapshot(cmd.Context(), "")
			if err != nil {
				return err
			}
			r := fleetview.NewReport(fleetview.Usage(snap, fleetview.Filter{Node: o.node, Namespace: namespace}))
			if o.output == "json" {
				return r.WriteJSON(cmd.OutOrStdout())
			}
			return r.WriteTable(cmd.OutOrStdout(), o.output == "wide")
		},
	}
	o.flags(cmd, "wide or json (default: a table)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only GPUs with a claim of this namespace")
	return cmd
}

func newCapacityCommand() *cobra.Command {
	o := &fleetOptions{}
	var req fleetview.Request
	var limit int
	cmd := &cobra.Command{
		Use:   "capacity (--mig-profile PROFILE | --class NAME | --template NAMESPACE/NAME)",
		Short: "How many more claims of a kind the fleet can take now, per node and in total",
		Long: `capacity answers "would 20 more 1g.10gb pods fit": for each node it
allocates copies of the claim one after the other with the kube-scheduler's
own allocator, on the node's published devices with every current allocation
booked, until one does not fit. That is what creating that many pods does as
far as devices go; CPU, memory, node taints and cordons are not counted.

  gpudra capacity --mig-profile 1g.10gb              one MIG device of that profile
  gpudra capacity --class gpu.nvidia.com --count 2   two devices of a class per claim
  gpudra capacity --template ml/one-h100             a claim from a ResourceClaimTemplate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "" && o.output != "wide" && o.output != "json" {
				return fmt.Errorf("--output %q: use wide or json, or leave it out for the table", o.output)
			}
			snap, err := o.snapshot(cmd.Context(), req.Template)
			if err != nil {
				return err
			}
			r, err := fleetview.Capacity(cmd.Context(), snap, req, o.node, limit)
			if err != nil {
				return err
			}
			if o.output == "json" {
				return r.WriteJSON(cmd.OutOrStdout())
			}
			return r.WriteTable(cmd.OutOrStdout(), o.output == "wide")
		},
	}
	o.flags(cmd, "wide (every node, also those that take none) or json (default: a table)")
	f := cmd.Flags()
	f.StringVar(&req.MigProfile, "mig-profile", "", "one MIG device of this profile (e.g. 1g.10gb) per claim, through the MIG DeviceClass")
	f.StringVar(&req.Class, "class", "", "devices of this DeviceClass per claim (--count, default 1)")
	f.StringVar(&req.Template, "template", "", "a claim from this ResourceClaimTemplate (NAMESPACE/NAME)")
	f.Int64Var(&req.Count, "count", 0, "devices per claim with --class or --mig-profile (default 1)")
	f.IntVar(&limit, "max-per-node", 1000, "stop counting a node at this many claims (the total is then a floor)")
	return cmd
}
