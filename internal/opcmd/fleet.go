// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/diagnose"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/fleetview"
)

// fleetOptions are the flags usage and capacity share.
type fleetOptions struct {
	cluster *cluster
	out     output
	node    string
}

func newFleetOptions(cmd *cobra.Command, prog, outputs string) *fleetOptions {
	o := &fleetOptions{cluster: newCluster()}
	f := cmd.Flags()
	o.cluster.addFlags(f, prog)
	o.out.addFlags(f, []string{"", "wide"}, outputs)
	f.StringVar(&o.node, "node", "", "only this node")
	return o
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
	if o.cluster.from != "" {
		snap, err := readSnapshot(o.cluster.from)
		if err != nil {
			return nil, err
		}
		if snap.DriverName == "" {
			snap.DriverName = o.cluster.driverName
		}
		return snap, nil
	}
	cs, err := o.cluster.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.cluster.timeout)
	defer cancel()
	return fleetview.Gather(ctx, cs, o.cluster.driverName, template)
}

// NewUsageCommand is `usage`.
func NewUsageCommand(prog string) *cobra.Command {
	var o *fleetOptions
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
with a few List calls. With -n, only the GPUs with a claim of that namespace.`,
		Example: fmt.Sprintf(`  %[1]s usage
  %[1]s usage -o wide --node gpu-node-3
  %[1]s usage -n ml -o yaml --context prod`, prog),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			snap, err := o.snapshot(cmd.Context(), "")
			if err != nil {
				return err
			}
			r := fleetview.NewReport(fleetview.Usage(snap, fleetview.Filter{Node: o.node, Namespace: o.cluster.explicitNamespace()}))
			if printed, err := o.out.print(cmd.OutOrStdout(), r); printed {
				return err
			}
			return r.WriteTable(cmd.OutOrStdout(), o.out.format == "wide")
		},
	}
	o = newFleetOptions(cmd, prog, "wide, json or yaml (default: a table)")
	return cmd
}

// NewCapacityCommand is `capacity`.
func NewCapacityCommand(prog string) *cobra.Command {
	var o *fleetOptions
	var req fleetview.Request
	var limit int
	cmd := &cobra.Command{
		Use:   "capacity (--mig-profile PROFILE | --class NAME | --template [NAMESPACE/]NAME)",
		Short: "How many more claims of a kind the fleet can take now, per node and in total",
		Long: `capacity answers "would 20 more 1g.10gb pods fit": for each node it
allocates copies of the claim one after the other with the kube-scheduler's
own allocator, on the node's published devices with every current allocation
booked, until one does not fit. That is what creating that many pods does as
far as devices go; CPU, memory, node taints and cordons are not counted.`,
		Example: fmt.Sprintf(`  %[1]s capacity --mig-profile 1g.10gb              one MIG device of that profile
  %[1]s capacity --class gpu.nvidia.com --count 2   two devices of a class per claim
  %[1]s capacity --template ml/one-h100             a claim from a ResourceClaimTemplate
  %[1]s capacity --template one-h100 -n ml -o json  the same, as JSON`, prog),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			if req.Template != "" {
				t, err := o.cluster.qualify("--template", req.Template)
				if err != nil {
					return err
				}
				req.Template = t
			}
			snap, err := o.snapshot(cmd.Context(), req.Template)
			if err != nil {
				return err
			}
			r, err := fleetview.Capacity(cmd.Context(), snap, req, o.node, limit)
			if err != nil {
				return err
			}
			if printed, err := o.out.print(cmd.OutOrStdout(), r); printed {
				return err
			}
			return r.WriteTable(cmd.OutOrStdout(), o.out.format == "wide")
		},
	}
	o = newFleetOptions(cmd, prog, "wide (every node, also those that take none), json or yaml (default: a table)")
	f := cmd.Flags()
	f.StringVar(&req.MigProfile, "mig-profile", "", "one MIG device of this profile (e.g. 1g.10gb) per claim, through the MIG DeviceClass")
	f.StringVar(&req.Class, "class", "", "devices of this DeviceClass per claim (--count, default 1)")
	f.StringVar(&req.Template, "template", "", "a claim from this ResourceClaimTemplate (NAMESPACE/NAME, or NAME in the namespace kubectl would use)")
	f.Int64Var(&req.Count, "count", 0, "devices per claim with --class or --mig-profile (default 1)")
	f.IntVar(&limit, "max-per-node", 1000, "stop counting a node at this many claims (the total is then a floor)")
	return cmd
}
