// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/diagnose"
)

// exitCode makes main exit with a status of the command's choosing
// (diagnose: 0 fine, 1 cause found, 2 could not tell) without printing.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

type diagnoseOptions struct {
	kubeconfig, context, output, driverName, dump, from string
	timeout                                             time.Duration
}

func newDiagnoseCommand() *cobra.Command {
	o := &diagnoseOptions{}
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

Exit status: 0 when the pod is fine (or the node serves its GPUs), 1 when the
blocking cause was found, 2 when the tool could not tell.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.driverName, "driver-name", "gpu.nvidia.com", "the driver's name (chart value driverName)")
	f.StringVar(&o.dump, "dump", "", "also write the cluster state read to this YAML file, mode 0600, without env and annotation values (for bug reports and test fixtures)")
	f.StringVar(&o.from, "from", "", "diagnose a state written by --dump instead of reading a cluster")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "time limit for reading the cluster")
	cmd.AddCommand(
		o.sub("pod NAMESPACE/NAME", "Why a pod is Pending, stuck in ContainerCreating, or without a GPU", "pod"),
		o.sub("claim NAMESPACE/NAME", "Why a ResourceClaim is not allocated, or what it got", "claim"),
		o.sub("node NAME", "The driver on a node: plugin pod, registration, pool, devices, claims", "node"),
	)
	return cmd
}

func (o *diagnoseOptions) sub(use, short, kind string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTarget(kind, args[0])
			if err == nil && o.output != "text" && o.output != "json" {
				err = fmt.Errorf("--output %q: use text or json", o.output)
			}
			var snap *diagnose.Snapshot
			if err == nil {
				snap, err = o.snapshot(cmd.Context(), cmd.ErrOrStderr(), t)
			}
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "Error:", err)
				return exitCode(2) // could not tell
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
			if o.output == "json" {
				err = r.WriteJSON(cmd.OutOrStdout())
			} else {
				err = r.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if code := r.ExitCode(); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}

// parseTarget accepts NAMESPACE/NAME for pods and claims (NAME alone means
// the default namespace) and NAME for nodes.
func parseTarget(kind, arg string) (diagnose.Target, error) {
	if kind == "node" {
		if strings.Contains(arg, "/") {
			return diagnose.Target{}, fmt.Errorf("node %q: give the node's name, without a namespace", arg)
		}
		return diagnose.Target{Kind: kind, Name: arg}, nil
	}
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		ns, name = "default", arg
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return diagnose.Target{}, fmt.Errorf("%s %q: expected NAMESPACE/NAME", kind, arg)
	}
	return diagnose.Target{Kind: kind, Namespace: ns, Name: name}, nil
}

func (o *diagnoseOptions) snapshot(ctx context.Context, stderr io.Writer, t diagnose.Target) (*diagnose.Snapshot, error) {
	if o.from != "" {
		return readSnapshot(o.from)
	}
	cs, err := clientFor(o.kubeconfig, o.context, o.timeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	snap, err := diagnose.Gather(ctx, cs, o.driverName, t)
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

// clientFor connects as kubectl would: --kubeconfig, else $KUBECONFIG,
// else ~/.kube/config, and the --context given.
func clientFor(kubeconfig, context string, timeout time.Duration) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	// Protobuf: a 500-node fleet's slices decode in less time and memory.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// readSnapshot reads a snapshot `gpudra diagnose --dump` wrote (--from).
func readSnapshot(path string) (*diagnose.Snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	snap := &diagnose.Snapshot{}
	if err := yaml.UnmarshalStrict(data, snap); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return snap, nil
}
