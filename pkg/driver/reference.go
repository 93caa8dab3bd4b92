// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
)

// NVIDIA's reference DRA driver has the same driver name, plugin directory
// and CDI kind as this one (pkg/refdriver). A node switched from it
// without a drain still runs pods on devices it prepared, and this
// plugin, started there, would hand those devices out again: a whole GPU
// it holds looks free, and MIG devices it made look like an admin's
// static layout, free too. The start-up sweep would also delete the
// device metadata the kubelet helper wrote for its claims (the same file
// names as this driver's), which a container's restart needs. So start
// waits, before it touches anything, until none of its claims is left,
// and says so in its log, a Node event and /readyz.

// Node event reasons of the wait.
const (
	ReasonReferenceDriverClaims     = "ReferenceDriverClaims"
	ReasonReferenceDriverClaimsGone = "ReferenceDriverClaimsGone"
)

// DefaultReferencePoll is how often the wait looks again.
const DefaultReferencePoll = 10 * time.Second

// waitForReferenceDriver returns once the reference driver's checkpoint
// lists no live claim (renaming it then, so that no later start waits for
// the API server over it), or with ctx's error when ctx ends first.
func waitForReferenceDriver(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	status := cfg.ReferenceWait
	if status == nil {
		status = func(string) {}
	}
	since, reported, bootID, bootRead := time.Now(), "", "", false
	for attempt := 1; ; attempt++ {
		cp, err := refdriver.ReadCheckpoint(cfg.PluginDir)
		var live []refdriver.Claim
		if err == nil && cp != nil {
			if !bootRead { // read only on the reference driver's nodes
				bootID, bootRead = readBootID(logger, cmp.Or(cfg.BootIDFile, cfg.Backend.BootIDFile)), true
			}
			live = liveReferenceClaims(ctx, cfg, cp, bootID)
		}
		if err == nil && len(live) == 0 {
			if cp == nil {
				return nil // the common case: never the reference driver's node
			}
			if err := cp.Rename(); err != nil {
				logger.Error(err, "Cannot rename NVIDIA's reference driver's checkpoint; the next start reads it again", "file", cp.Path)
			} else {
				logger.Info("NVIDIA's reference driver's checkpoint lists no claim in use; renamed it", "file", cp.Path+refdriver.MigratedSuffix, "listed", len(cp.Claims))
			}
			if reported != "" {
				waited := time.Since(since).Round(time.Second)
				status("")
				msg := fmt.Sprintf("the claims NVIDIA's reference DRA driver prepared on this node are gone (waited %v); the plugin starts and publishes its GPUs", waited)
				logger.Info("The reference driver's claims are gone; starting", "waited", waited)
				recordNodeEvent(ctx, cfg.Client, cfg.NodeName, v1.EventTypeNormal, ReasonReferenceDriverClaimsGone, msg)
			}
			return nil
		}
		specs, _ := refdriver.SpecFiles(cfg.CDIDir, cfg.DriverName)
		msg := referenceMessage(cfg, cp, live, len(specs), err)
		if msg != reported {
			reported = msg
			logger.Info("Not starting: NVIDIA's reference DRA driver has claims in use on this node; drain the node", "problem", msg, "claims", claimNames(live), "specs", len(specs))
			recordNodeEvent(ctx, cfg.Client, cfg.NodeName, v1.EventTypeWarning, ReasonReferenceDriverClaims, truncate(msg))
		} else {
			logger.V(4).Info("Still waiting for the reference driver's claims", "attempt", attempt, "claims", claimNames(live))
		}
		status(fmt.Sprintf("waiting since %s (attempt %d): %s", since.Format(time.RFC3339), attempt, msg))
		select {
		case <-ctx.Done():
			logger.Info("Stopping while waiting for the reference driver's claims", "attempts", attempt)
			return ctx.Err()
		case <-time.After(cmp.Or(cfg.ReferencePoll, DefaultReferencePoll)):
		}
	}
}

// referenceMessage says what the node holds and what to do, for the log,
// the event and /readyz.
func referenceMessage(cfg Config, cp *refdriver.Checkpoint, live []refdriver.Claim, specs int, readErr error) string {
	if readErr != nil {
		return fmt.Sprintf("cannot tell which claims NVIDIA's reference DRA driver still has prepared on this node: %v; the plugin does not start (it would publish and could reuse devices in use) until the file is gone: drain the node, then remove or rename the file", readErr)
	}
	mig := 0
	for _, c := range live {
		mig += len(c.Mig)
	}
	return fmt.Sprintf("NVIDIA's reference DRA driver still has %d claim(s) prepared on this node (%s; %d MIG device(s) and %d CDI spec(s) of its own), listed in %s; the plugin publishes no GPU, destroys no MIG device and removes no CDI spec until they are gone: drain the node (kubectl drain %s) so that their pods end; each is gone once the reference driver unprepared it or the API server has it deleted or deallocated",
		len(live), strings.Join(claimNames(live), ", "), mig, specs, cp.Path, cfg.NodeName)
}

func claimNames(claims []refdriver.Claim) []string {
	out := make([]string, 0, len(claims))
	for _, c := range claims {
		out = append(out, c.String())
	}
	return out
}

func truncate(msg string) string {
	const maxMessage = 1024 // events are for humans; the log has everything
	if len(msg) > maxMessage {
		return msg[:maxMessage-3] + "..."
	}
	return msg
}

// liveReferenceClaims are the claims of the checkpoint that a container
// may still use. A claim is gone when
//   - the checkpoint was validated in another boot: the reference driver
//     itself drops such claims (device_state.go, NewDeviceState:
//     "Invalidating checkpoint"), and no container of an earlier boot runs;
//   - the API server has no such claim, one of another UID, or the claim
//     without that allocation: the resource claim controller removes a
//     pod's reservation only when the pod is gone or in a terminal phase,
//     then deallocates the claim or, for a pod's generated claim, deletes
//     it (k8s.io/kubernetes pkg/controller/resourceclaim/controller.go,
//     syncClaim and isPodDone), so no running container has it. The
//     reference driver unprepares such claims by the same rule
//     (cleanup.go, CheckpointCleanupManager).
//
// A claim the API cannot tell about (no name in the v1 format, or an
// error) counts as live.
func liveReferenceClaims(ctx context.Context, cfg Config, cp *refdriver.Checkpoint, bootID string) []refdriver.Claim {
	if cp.NodeBootID != "" && bootID != "" && cp.NodeBootID != bootID {
		return nil
	}
	var live []refdriver.Claim
	for _, c := range cp.Claims {
		if c.Name == "" || cfg.Client == nil {
			live = append(live, c)
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, prepare.APITimeout)
		claim, err := cfg.Client.ResourceV1().ResourceClaims(c.Namespace).Get(callCtx, c.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Cannot look up a claim of the reference driver; it counts as in use", "claim", c.String(), "err", err.Error())
			live = append(live, c)
		case claim.UID != types.UID(c.UID) || !sameAllocation(cfg.DriverName, claim.Status.Allocation, c.Allocation):
			continue
		default:
			live = append(live, c)
		}
	}
	return live
}

// sameAllocation reports whether the claim is still allocated the devices
// of the driver the reference driver prepared.
func sameAllocation(driver string, now, then *resourceapi.AllocationResult) bool {
	if now == nil {
		return false
	}
	if then == nil {
		return true // it kept none to compare with: still allocated, so in use
	}
	keys := func(a *resourceapi.AllocationResult) []string {
		var out []string
		for _, r := range a.Devices.Results {
			if r.Driver == driver {
				out = append(out, r.Request+"/"+r.Pool+"/"+r.Device)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(keys(now), keys(then))
}
