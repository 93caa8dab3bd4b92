// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
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

func (o *fleetOptions) snapshot(ctx context.Context, template string) (*clusterview.Snapshot, error) {
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
	var forRef, file string
	cmd := &cobra.Command{
		Use:   "capacity (--for KIND/NAME | -f FILE | --mig-profile PROFILE | --class NAME | --template [NAMESPACE/]NAME)",
		Short: "How many more pods of a workload, or claims of a kind, the fleet can take now, per node and in total",
		Long: `capacity answers "how many more replicas of this Deployment fit".

With --for KIND/NAME (a Deployment, StatefulSet, ReplicaSet, Job or Pod) or
-f FILE (a manifest of one of them) it counts copies of the pod template, node
by node, through the kube-scheduler's filters: NodeUnschedulable (cordoned),
TaintToleration (NoSchedule and NoExecute taints), NodeAffinity (nodeSelector
and required affinity), NodeResourcesFit (CPU, memory, pod slots and other
requests against the node's allocatable, less the requests of its pods) and
DynamicResources (the pod's claims, from their templates, allocated by the
scheduler's own allocator with every current allocation booked). Each node
that takes no more says which filter stops it, as the scheduler names it.

With --mig-profile, --class or --template it counts claims only: devices,
not CPU, memory, taints or cordons.`,
		Example: fmt.Sprintf(`  %[1]s capacity --for deployment/inference -n ml     more replicas of a Deployment
  %[1]s capacity -f pod.yaml -o json                  more copies of a pod manifest
  %[1]s capacity --mig-profile 1g.10gb                claims for one MIG device of that profile
  %[1]s capacity --class gpu.nvidia.com --count 2     claims for two devices of a class
  %[1]s capacity --template ml/one-h100               claims from a ResourceClaimTemplate`, prog),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.out.check(); err != nil {
				return err
			}
			if forRef != "" || file != "" {
				if forRef != "" && file != "" || req != (fleetview.Request{}) {
					return fmt.Errorf("--for and -f count pods: give one of them, without --mig-profile, --class, --template or --count")
				}
				return o.podCapacity(cmd, forRef, file, limit)
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
			if err := r.WriteTable(cmd.OutOrStdout(), o.out.format == "wide"); err != nil {
				return err
			}
			noteAllocator(cmd.ErrOrStderr(), snap)
			return nil
		},
	}
	o = newFleetOptions(cmd, prog, "wide (every node, also those that take none), json or yaml (default: a table)")
	f := cmd.Flags()
	f.StringVar(&forRef, "for", "", "count more pods of this workload's template: deployment/NAME, statefulset/NAME, replicaset/NAME, job/NAME or pod/NAME (in -n's namespace)")
	f.StringVarP(&file, "filename", "f", "", "count more pods of the one Pod, Deployment, StatefulSet, ReplicaSet or Job in this manifest (- for standard input)")
	f.StringVar(&req.MigProfile, "mig-profile", "", "one MIG device of this profile (e.g. 1g.10gb) per claim, through the MIG DeviceClass")
	f.StringVar(&req.Class, "class", "", "devices of this DeviceClass per claim (--count, default 1)")
	f.StringVar(&req.Template, "template", "", "a claim from this ResourceClaimTemplate (NAMESPACE/NAME, or NAME in the namespace kubectl would use)")
	f.Int64Var(&req.Count, "count", 0, "devices per claim with --class or --mig-profile (default 1)")
	f.IntVar(&limit, "max-per-node", 1000, "stop counting a node at this many claims or pods (the total is then a floor)")
	return cmd
}

// podCapacity is capacity --for and -f: the workload's pod, counted
// through the scheduler's filters.
func (o *fleetOptions) podCapacity(cmd *cobra.Command, forRef, file string, limit int) error {
	ctx := cmd.Context()
	ns := o.cluster.namespace()
	var shape *fleetview.PodShape
	var snap *clusterview.Snapshot
	var err error
	if file != "" {
		if shape, err = fleetview.ReadShapeFile(file, ns); err != nil {
			return err
		}
	}
	if o.cluster.from != "" {
		if forRef != "" {
			return fmt.Errorf("--for reads the workload from the cluster; with --from give the pod as -f FILE")
		}
		if snap, err = o.snapshot(ctx, ""); err != nil {
			return err
		}
	} else {
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(fleetMemoryLimit)
		}
		cs, err := o.cluster.client()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, o.cluster.timeout)
		defer cancel()
		if forRef != "" {
			if shape, err = fleetview.GetShape(ctx, cs, ns, forRef); err != nil {
				return err
			}
		}
		if snap, err = fleetview.GatherForPod(ctx, cs, o.cluster.driverName, shape.Pod.Namespace); err != nil {
			return err
		}
	}
	r, err := fleetview.PodCapacity(ctx, snap, shape, o.node, limit)
	if err != nil {
		return err
	}
	if printed, err := o.out.print(cmd.OutOrStdout(), r); printed {
		return err
	}
	if err := r.WriteTable(cmd.OutOrStdout()); err != nil {
		return err
	}
	noteAllocator(cmd.ErrOrStderr(), snap)
	return nil
}
