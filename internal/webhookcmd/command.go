// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhookcmd is the gpu-dra-webhook command, the validating
// admission webhook of the GPU DRA driver: it rejects ResourceClaims and
// ResourceClaimTemplates whose opaque config for this driver the kubelet
// plugin would reject at prepare. One replica at a time also explains
// Pending pods that only device taints block (explain.go); the
// pending-explainer subcommand does only that (explainer_cmd.go).
// flags -> config -> run; cmd/gpu-dra-webhook only calls NewCommand.
package webhookcmd

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/webhook"
)

type options struct {
	driverName string
	listen     string
	certFile   string
	keyFile    string
	kubeconfig string
	explain    explainOptions
}

// NewCommand is the gpu-dra-webhook command with its flags and the
// pending-explainer subcommand.
func NewCommand() *cobra.Command { return newCommand() }

func newCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:           "gpu-dra-webhook",
		Short:         "Validating admission webhook for the GPU DRA driver's opaque configs in ResourceClaims and ResourceClaimTemplates",
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	cmd.PersistentFlags().StringVar(&o.driverName, "driver-name", "gpu.nvidia.com", "DRA driver whose opaque configs are checked (and whose devices' taints are explained); configs of other drivers pass untouched.")
	f.StringVar(&o.listen, "listen", ":9443", "HTTPS address for /validate, /healthz and /readyz.")
	f.StringVar(&o.certFile, "tls-cert-file", "/etc/gpu-dra-webhook/tls/tls.crt", "Serving certificate (PEM); reloaded when it changes.")
	f.StringVar(&o.keyFile, "tls-private-key-file", "/etc/gpu-dra-webhook/tls/tls.key", "Private key of the serving certificate (PEM).")
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig file; in-cluster config when empty.")
	addExplainFlags(cmd, &o.explain)
	goflags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(goflags)
	cmd.PersistentFlags().AddGoFlagSet(goflags)
	cmd.AddCommand(newPendingExplainerCommand(&o.driverName))
	return cmd
}

func run(ctx context.Context, o *options) error {
	logger := klog.FromContext(ctx)
	if err := o.explain.validate(); err != nil {
		return err
	}
	certs, err := webhook.NewCertLoader(o.certFile, o.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
	}
	client, err := newClient(o.kubeconfig)
	if err != nil {
		return err
	}
	// DeviceClasses other than the driver's own tell the device type of a
	// request by their selectors; the informer keeps the lookup local.
	factory := informers.NewSharedInformerFactory(client, 0)
	classes := factory.Resource().V1().DeviceClasses()
	lister := classes.Lister()
	informer := classes.Informer() // registers it before Start
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	var synced atomic.Bool
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			synced.Store(true)
			logger.Info("DeviceClasses synced; ready")
		}
	}()

	mux := http.NewServeMux()
	mux.Handle("/validate", &webhook.Handler{Validator: webhook.NewValidator(o.driverName, lister), Logger: logger})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced.Load() {
			http.Error(w, "DeviceClasses not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{
		Addr:              o.listen,
		Handler:           mux,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		// The apiserver keeps connections to webhooks open; a new TLS
		// handshake per claim would cost more than the review.
		IdleTimeout: 90 * time.Second,
	}
	explainCtx, stopExplaining := context.WithCancel(ctx)
	explained := make(chan struct{})
	go func() {
		defer close(explained)
		runExplainer(explainCtx, client, o.driverName, o.explain)
	}()
	// On the way out the Lease is released, so that another replica
	// takes over at once.
	defer func() { stopExplaining(); <-explained }()

	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServeTLS("", "") }()
	logger.Info("Serving", "address", o.listen, "driver", o.driverName, "explainPending", o.explain.enabled)
	select {
	case err := <-errc:
		return fmt.Errorf("--listen %s: %w", o.listen, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newClient is the client of both commands (the webhook's and
// pending-explainer's).
func newClient(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
	}
	return cfg, nil
}
