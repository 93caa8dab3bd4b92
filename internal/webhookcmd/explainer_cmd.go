// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhookcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// pendingExplainerOptions run the pending explainer alone, as the chart
// does (issue 46): in a Deployment of its own under a ServiceAccount of its
// own, so that the webhook's pods, which the API server reaches over the
// network, hold a token that reads DeviceClasses only, while the token that
// lists every pod, node, claim and slice sits in a pod nothing connects to.
type pendingExplainerOptions struct {
	driverName   string
	kubeconfig   string
	healthListen string
	explain      explainOptions
}

func newPendingExplainerCommand(driverName *string) *cobra.Command {
	o := &pendingExplainerOptions{}
	cmd := &cobra.Command{
		Use:   "pending-explainer",
		Short: "Only explain Pending pods that device taints block (no admission): the chart's pending-explainer Deployment",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			o.driverName = *driverName
			return runPendingExplainer(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "Kubeconfig file; in-cluster config when empty ($KUBECONFIG is not read: the explainer runs in a cluster).")
	f.StringVar(&o.healthListen, "health-listen", ":9445", "Plain HTTP address for /healthz (no secrets are served); empty serves none.")
	addExplainFlags(cmd, &o.explain)
	return cmd
}

func runPendingExplainer(ctx context.Context, o *pendingExplainerOptions) error {
	logger := klog.FromContext(ctx)
	if !o.explain.enabled {
		return errors.New("pending-explainer with --explain-pending=false would do nothing: drop the flag, or do not run this command")
	}
	if err := o.explain.validate(); err != nil {
		return err
	}
	client, err := newClient(o.kubeconfig)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	var srv *http.Server
	if o.healthListen != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv = &http.Server{Addr: o.healthListen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- srv.ListenAndServe() }()
	}
	logger.Info("Explaining Pending pods", "driver", o.driverName, "lease", o.explain.leaseNamespace+"/"+o.explain.leaseName)
	explained := make(chan struct{})
	go func() {
		defer close(explained)
		runExplainer(ctx, client, o.driverName, o.explain)
	}()
	select {
	case err := <-errc:
		<-explained
		return fmt.Errorf("--health-listen %s: %w", o.healthListen, err)
	case <-explained:
	}
	if srv != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}
	return nil
}
