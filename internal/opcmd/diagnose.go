// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/diagnose"
)

type diagnoseOptions struct {
	cluster *cluster
	out     output
	dump    string
}

// NewDiagnoseCommand is `diagnose pod|claim|node`.
func NewDiagnoseCommand(prog string) *cobra.Command {
	o := &diagnoseOptions{cluster: newCluster()}
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Explain why a pod is Pending or has no GPU, or what a node's driver serves",
		// The exit status carries the outcome; errors are printed here.
		SilenceUsage: true, SilenceErrors: true,
		Long: `diagnose reads the cluster through a kubeconfig and prints a verdict first,
then the evidence: for a Pending pod, each request of each claim from
published devices through the class's and the request's CEL selectors to
free devices; for a pod stuck after scheduling, the failed prepare step; for
a node, the plugin pod, its registration, the published pool and the claims.

A pod or claim is NAMESPACE/NAME, or NAME in the namespace -n names (else
the kubeconfig context's, else default), as kubectl finds it.

Exit status: 0 when the pod is fine (or the node serves its GPUs), 1 when the
blocking cause was found, 2 when the tool could not tell.`,
		Example: fmt.Sprintf(`  %[1]s diagnose pod ml/train
  %[1]s diagnose pod train -n ml -o yaml
  %[1]s diagnose node gpu-node-3 --context prod`, prog),
	}
	f := cmd.PersistentFlags()
	o.cluster.addFlags(f, prog)
	o.out.addFlags(f, []string{"text"}, "text, json or yaml")
	f.StringVar(&o.dump, "dump", "", "also write the cluster state read to this YAML file, mode 0600, without env and annotation values (for bug reports and test fixtures)")
	cmd.AddCommand(
		o.sub("pod [NAMESPACE/]NAME", "Why a pod is Pending, stuck in ContainerCreating, or without a GPU", "pod"),
		o.sub("claim [NAMESPACE/]NAME", "Why a ResourceClaim is not allocated, or what it got", "claim"),
		o.sub("node NAME", "The driver on a node: plugin pod, registration, pool, devices, claims", "node"),
	)
	return cmd
}

func (o *diagnoseOptions) sub(use, short, kind string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := o.target(kind, args[0])
			if err == nil {
				err = o.out.check()
			}
			var snap *clusterview.Snapshot
			if err == nil {
				snap, err = o.snapshot(cmd.Context(), cmd.ErrOrStderr(), t)
			}
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
				return ExitCode(2) // could not tell
			}
			var r *diagnose.Report
			switch t.Kind {
			case "pod":
				r = diagnose.DiagnosePod(snap, t.Namespace, t.Name)
			case "claim":
				r = diagnose.DiagnoseClaim(snap, t.Namespace, t.Name)
			default:
				r = diagnose.DiagnoseNode(snap, t.Name)
			}
			printed, err := o.out.print(cmd.OutOrStdout(), r)
			if !printed {
				if err = r.WriteText(cmd.OutOrStdout()); err == nil && t.Kind != "node" {
					// A node's diagnosis reads what it publishes;
					// pods and claims are answered by the allocator.
					noteAllocator(cmd.ErrOrStderr(), snap)
				}
			}
			if err != nil {
				return err
			}
			if code := r.ExitCode(); code != 0 {
				return ExitCode(code)
			}
			return nil
		},
	}
}

// target is the pod, claim or node to diagnose: NAMESPACE/NAME or NAME
// (in the namespace kubectl would use) for pods and claims, NAME for nodes.
func (o *diagnoseOptions) target(kind, arg string) (clusterview.Target, error) {
	if kind == "node" {
		if strings.Contains(arg, "/") {
			return clusterview.Target{}, fmt.Errorf("node %q: give the node's name, without a namespace", arg)
		}
		return clusterview.Target{Kind: kind, Name: arg}, nil
	}
	full, err := o.cluster.qualify(kind, arg)
	if err != nil {
		return clusterview.Target{}, err
	}
	ns, name, _ := strings.Cut(full, "/")
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return clusterview.Target{}, fmt.Errorf("%s %q: expected NAMESPACE/NAME or NAME", kind, arg)
	}
	return clusterview.Target{Kind: kind, Namespace: ns, Name: name}, nil
}

func (o *diagnoseOptions) snapshot(ctx context.Context, stderr io.Writer, t clusterview.Target) (*clusterview.Snapshot, error) {
	if o.cluster.from != "" {
		return readSnapshot(o.cluster.from)
	}
	cs, err := o.cluster.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.cluster.timeout)
	defer cancel()
	snap, err := clusterview.Gather(ctx, cs, o.cluster.driverName, t)
	if err != nil {
		return nil, err
	}
	if o.dump != "" {
		if err := diagnose.WriteDump(o.dump, snap); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "Wrote %s (mode 0600), leaving out %s. Read it before you share it.\n", o.dump, strings.Join(diagnose.DumpLeftOut, "; "))
	}
	return snap, nil
}
