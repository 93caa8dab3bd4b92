// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhookcmd

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/pendingexplainer"
)

// explainOptions are the pending explainer's flags. It runs on one
// replica at a time (the holder of a Lease), so that each Event is posted
// once; every replica serves admission regardless.
type explainOptions struct {
	enabled        bool
	leaseNamespace string
	leaseName      string
	identity       string
}

// Lease timing as kube-controller-manager's defaults: a new leader within
// ~15 s of a crash, at one renewal per 2 s.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func addExplainFlags(cmd *cobra.Command, o *explainOptions) {
	f := cmd.Flags()
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		identity, _ = os.Hostname()
	}
	f.BoolVar(&o.enabled, "explain-pending", true, "Post a Warning Event (DeviceTaintsBlockScheduling) on a Pending pod that only device taints of this driver's GPUs keep from being scheduled; the replica holding the Lease does.")
	f.StringVar(&o.leaseNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the pending explainer's Lease.")
	f.StringVar(&o.leaseName, "leader-election-lease-name", "gpu-dra-webhook-pending-explainer", "Name of the pending explainer's Lease.")
	f.StringVar(&o.identity, "leader-election-identity", identity, "This replica's identity in the Lease.")
}

func (o *explainOptions) validate() error {
	if !o.enabled {
		return nil
	}
	switch {
	case o.leaseNamespace == "":
		return errors.New("--explain-pending needs --leader-election-namespace (or $POD_NAMESPACE)")
	case o.leaseName == "":
		return errors.New("--explain-pending needs --leader-election-lease-name")
	case o.identity == "":
		return errors.New("--explain-pending needs --leader-election-identity (or $POD_NAME)")
	}
	return nil
}

// runExplainer campaigns for the Lease until ctx ends and runs the
// explainer while it holds it. A replica that loses the Lease stops its
// explainer (and its informers: a follower holds no caches) and campaigns
// again. It returns at once when the explainer is off.
func runExplainer(ctx context.Context, client kubernetes.Interface, driverName string, o explainOptions) {
	if !o.enabled {
		return
	}
	logger := klog.FromContext(ctx).WithName("pending-explainer")
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.leaseNamespace, Name: o.leaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.identity},
	}
	for ctx.Err() == nil {
		var term leaderTerm
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   leaseDuration,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     retryPeriod,
			ReleaseOnCancel: true,
			Name:            o.leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					term.run(ctx, func(ctx context.Context) {
						logger.Info("Leading: explaining Pending pods", "lease", o.leaseNamespace+"/"+o.leaseName, "identity", o.identity)
						explain(ctx, client, driverName)
					})
				},
				OnStoppedLeading: func() { logger.V(2).Info("Not leading", "identity", o.identity) },
			},
		})
		if err != nil {
			// The config above is fixed and valid; only a bug gets here.
			logger.Error(err, "Leader election")
			return
		}
		elector.Run(ctx)
		// Run returns once the Lease is lost, while the explainer may
		// still be stopping: the next term's must not overlap it.
		term.wait()
	}
}

// leaderTerm is the explainer of one term of leadership. The elector
// starts OnStartedLeading in a goroutine of its own and returns without
// waiting for it.
type leaderTerm struct {
	mu   sync.Mutex
	done chan struct{}
}

func (t *leaderTerm) run(ctx context.Context, f func(context.Context)) {
	t.mu.Lock()
	if ctx.Err() != nil {
		// Started after the term ended: the elector cancels the term's
		// context before Run returns, so wait() did not wait for this.
		t.mu.Unlock()
		return
	}
	t.done = make(chan struct{})
	defer close(t.done)
	t.mu.Unlock()
	f(ctx)
}

func (t *leaderTerm) wait() {
	t.mu.Lock()
	done := t.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// explain runs one explainer, with its own Event broadcaster, until ctx
// ends.
func explain(ctx context.Context, client kubernetes.Interface, driverName string) {
	logger := klog.FromContext(ctx)
	// Its explanations are the allocator's this binary links, whatever the
	// cluster's kube-scheduler: say which, and warn across minors (after an
	// upgrade of the control plane without one of this chart).
	line, warning := allocator.Describe(clusterview.ServerVersion(client))
	logger.Info("Pending explainer: " + line)
	if warning != "" {
		logger.Info("WARNING: " + warning)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		logger.Error(err, "Starting the event recorder")
		return
	}
	defer broadcaster.Shutdown()
	e, err := pendingexplainer.New(ctx, pendingexplainer.Config{
		DriverName: driverName,
		Client:     client,
		Recorder:   broadcaster.NewRecorder(clientsetscheme.Scheme, pendingexplainer.ReportingController),
	})
	if err != nil {
		logger.Error(err, "Starting the pending explainer")
		return
	}
	if err := e.Run(ctx); err != nil && ctx.Err() == nil {
		logger.Error(err, "Pending explainer")
	}
}
