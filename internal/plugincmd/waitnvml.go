// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Node event reasons of the wait for NVML.
const (
	reasonNVMLNotReady = "NVMLNotReady"
	reasonNVMLReady    = "NVMLReady"
	maxEventMessage    = 1024
)

// nvmlWait opens the backend, and while NVML is not ready (no library
// yet, or nvmlInit fails: on a node whose driver is still being
// installed, the kernel module is not loaded yet) tries again with
// back-off instead of exiting: an exit would put the plugin into the
// kubelet's crash-loop back-off of up to 5 minutes, and the node would
// publish its GPUs that much later. Meanwhile the process is live and
// not ready, and says what is missing once per cause, in its log and in
// a Node event. Any other error (a bad flag, a failed discovery) still
// ends the start.
type nvmlWait struct {
	open func() (*backend.Backend, error)
	// initial is the first pause; it doubles up to max.
	initial, max time.Duration
	// event records a Node event.
	event func(ctx context.Context, eventType, reason, msg string)
	// status is what /readyz says while waiting.
	status atomic.Pointer[string]
}

// notReady is /readyz's answer while the plugin waits; nil otherwise.
func (w *nvmlWait) notReady() error {
	if s := w.status.Load(); s != nil {
		return errors.New(*s)
	}
	return nil
}

// run returns the opened backend, or nil and no error when ctx ends first.
func (w *nvmlWait) run(ctx context.Context) (*backend.Backend, error) {
	logger := klog.FromContext(ctx)
	delay, state, since := w.initial, "", time.Now()
	for attempt := 1; ; attempt++ {
		be, err := w.open()
		var notReady *nvdev.NotReadyError
		switch {
		case err == nil:
			if state != "" {
				w.status.Store(nil)
				waited := time.Since(since).Round(time.Millisecond)
				logger.Info("NVML is ready; starting", "attempts", attempt, "waited", waited)
				w.event(ctx, v1.EventTypeNormal, reasonNVMLReady, fmt.Sprintf("NVML initialized after %v (%d attempts); the plugin starts and publishes its GPUs", waited, attempt))
			}
			return be, nil
		case !errors.As(err, &notReady):
			return nil, err
		}
		if s := notReady.State(); s != state {
			state = s
			logger.Info("Waiting for NVML: the plugin stays up, not ready, and retries", "problem", notReady.Problem(), "check", notReady.Check(), "maxRetryInterval", w.max)
			msg := fmt.Sprintf("NVML is not ready: %v; the plugin stays up and retries (at most %v apart), and publishes its GPUs as soon as NVML initializes", notReady, w.max)
			if len(msg) > maxEventMessage { // events are for humans; the log has everything
				msg = msg[:maxEventMessage-3] + "..."
			}
			w.event(ctx, v1.EventTypeWarning, reasonNVMLNotReady, msg)
		} else {
			logger.V(4).Info("NVML still not ready", "attempt", attempt, "err", err.Error())
		}
		msg := fmt.Sprintf("waiting for NVML since %s (attempt %d, next in %v): %v", since.Format(time.RFC3339), attempt, delay, err)
		w.status.Store(&msg)
		select {
		case <-ctx.Done():
			logger.Info("Stopping while waiting for NVML", "attempts", attempt)
			return nil, nil
		case <-time.After(delay):
		}
		delay = min(2*delay, w.max)
	}
}
