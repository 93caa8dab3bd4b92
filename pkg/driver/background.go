// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// What the plugin does with the API server happens here, after Start has
// returned: the API server may be away (a node booting during an outage,
// a control-plane upgrade), and the kubelet's calls for claims whose state
// is local must not wait for it. Every call has a timeout and is retried
// with backoff until it succeeds or the plugin stops.

// apiBackoff paces the retries: 1 s doubling to 30 s.
func apiBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 6, Cap: 30 * time.Second}
}

// retry runs f until it succeeds or ctx ends, sleeping with backoff.
func retry(ctx context.Context, what string, f func(context.Context) error) bool {
	logger := klog.FromContext(ctx)
	b := apiBackoff()
	for {
		callCtx, cancel := context.WithTimeout(ctx, prepare.APITimeout)
		err := f(callCtx)
		cancel()
		if err == nil {
			return true
		}
		delay := b.Step()
		if b.Steps == 0 {
			b.Steps = 1 // stay at the cap
		}
		logger.Error(err, "API server request failed; retrying", "what", what, "in", delay)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
	}
}

// publish hands the slices to the ResourceSlice controller, seeding them
// first on a node that has none, then follows device health. Readiness
// waits for it.
func (d *Driver) publish(ctx context.Context, resources resourceslice.DriverResources, book *ledger.Ledger, watched []health.Device) {
	if !d.startPublishing(ctx, resources) {
		return
	}
	// Health: NVML events and the slow poll feed the kubelet's health
	// stream, taints in the slices and claims' device conditions.
	d.followHealth(ctx, func(ctx context.Context, taints map[string][]resourceapi.DeviceTaint) error {
		res := resourceslices.WithTaints(resources, taints)
		if err := resourceslices.Validate(res); err != nil {
			return err
		}
		return d.helper.PublishResources(ctx, res)
	}, book, watched)
}

// startPublishing seeds the slices and starts the ResourceSlice controller,
// and reports whether it runs.
func (d *Driver) startPublishing(ctx context.Context, resources resourceslice.DriverResources) bool {
	defer close(d.publishStarted)
	logger := klog.FromContext(ctx)
	// Seeding is only a head start on the controller's one-second wait:
	// one bounded attempt.
	seedCtx, cancel := context.WithTimeout(ctx, prepare.APITimeout)
	start := time.Now()
	if n, err := seedSlices(seedCtx, d.cfg.Client, d.cfg.DriverName, d.cfg.NodeName, resources); err != nil {
		logger.Error(err, "Publishing ResourceSlices ahead of the resourceslice controller failed; it publishes them itself")
	} else if n > 0 {
		logger.Info("Published ResourceSlices", "slices", n, "duration", time.Since(start))
	}
	cancel()
	// The helper's first PublishResources starts the controller and waits
	// (with the plugin's own context) until its informer has synced,
	// however long the API server is away.
	if err := d.helper.PublishResources(ctx, resources); err != nil {
		if ctx.Err() != nil { // Stop, or the caller's end
			logger.V(2).Info("Stopped before the ResourceSlice controller ran", "reason", err)
			return false
		}
		d.HandleError(ctx, err, "Publishing ResourceSlices")
		return false
	}
	d.published.Store(true)
	logger.Info("ResourceSlice controller running", "sinceStart", time.Since(start))
	return true
}

// removeStale unprepares claims deleted or reallocated while the plugin
// was down, and tells the pods of claims that could not be restored after
// a reboot why, retrying until the API server has answered for all.
func (d *Driver) removeStale(ctx context.Context) {
	getClaim := func(ctx context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
		return d.cfg.Client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	}
	ok := retry(ctx, "check prepared claims against the API", func(context.Context) error {
		report, err := d.state.RemoveStale(ctx, getClaim)
		if report.Stale > 0 || report.UnownedMPS > 0 {
			klog.FromContext(ctx).Info("Removed what deleted claims left", "staleClaims", report.Stale, "unownedMPSStopped", report.UnownedMPS)
		}
		if errors.Is(err, checkpoint.ErrSuperseded) {
			return nil // a newer plugin instance owns the node now
		}
		return err
	})
	if ok {
		// Metadata files of claims unprepared here (deleted while the
		// plugin was down) have no kubelet call to remove them.
		d.sweepMetadata(ctx)
	}
	d.reconciled.Store(ok)
	for _, e := range d.state.Unrestored() {
		retry(ctx, "report unrestored claim", func(ctx context.Context) error {
			return d.reportUnrestored(ctx, e)
		})
	}
}

// Reconciled reports whether the claims deleted or reallocated while the
// plugin was down have been unprepared (the API server answered for all).
func (d *Driver) Reconciled() bool { return d.reconciled.Load() }

// ReasonClaimNotRestored is the reason of the Warning event on the pods of a
// claim the plugin could not restore after a reboot.
const ReasonClaimNotRestored = "ClaimNotRestored"

// reportUnrestored records a Warning event on the claim and on every pod
// that uses it, naming the claim and the reason.
func (d *Driver) reportUnrestored(ctx context.Context, e *prepare.RestoreError) error {
	claim, err := d.cfg.Client.ResourceV1().ResourceClaims(e.Namespace).Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted: nothing to tell
		}
		return err
	}
	if claim.UID != e.UID {
		return nil
	}
	msg := e.Error()
	objs := []v1.ObjectReference{{Kind: "ResourceClaim", APIVersion: "resource.k8s.io/v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}}
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" {
			objs = append(objs, v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: claim.Namespace, Name: r.Name, UID: r.UID})
		}
	}
	for _, obj := range objs {
		if err := recordEvent(ctx, d.cfg.Client, d.cfg.NodeName, obj.Namespace, obj, v1.EventTypeWarning, ReasonClaimNotRestored, msg); err != nil {
			return fmt.Errorf("event on %s %s: %w", obj.Kind, types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, err)
		}
	}
	return nil
}

// DefaultBootIDFile is where Linux keeps the boot ID: a random UUID made
// anew at every boot (proc(5), /proc/sys/kernel/random/boot_id).
const DefaultBootIDFile = "/proc/sys/kernel/random/boot_id"

var bootIDPattern = regexp.MustCompile(`^[0-9a-fA-F-]{1,64}$`)

// readBootID returns the node's boot ID, or "" when it cannot be read; the
// plugin then recognises a reboot only by MIG devices gone missing.
func readBootID(logger klog.Logger, path string) string {
	if path == "" {
		path = DefaultBootIDFile
	}
	data, err := capfile.Read(path, 128)
	if err != nil {
		logger.Error(err, "Cannot read the boot ID; a reboot is recognised only by MIG devices gone missing", "file", path)
		return ""
	}
	id := strings.TrimSpace(string(data))
	if !bootIDPattern.MatchString(id) {
		logger.Error(nil, "The boot ID file holds no boot ID; a reboot is recognised only by MIG devices gone missing", "file", path)
		return ""
	}
	return id
}
