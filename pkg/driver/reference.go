// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
)

// NVIDIA's reference DRA driver has the same driver name, plugin directory
// and CDI kind as this one (pkg/refdriver). A node switched from it
// without a drain still runs pods on devices it prepared. This plugin
// takes those claims over: at start, before it reads, sweeps or publishes
// anything, it reads the reference driver's checkpoint and holds every
// claim of it that may be in use in the ledger as a foreign claim (its
// GPU, or its MIG device's slices, are prepared for no other claim; its
// MIG devices and device metadata are not taken for leftovers). Then it
// registers with the kubelet like any start, so that the kubelet, which
// needs a registered gpu.nvidia.com plugin to unprepare the claims of the
// pods that end, can: the unprepare of a foreign claim releases what the
// reference driver made for it (reference_release.go). Waiting for the
// claims to go instead deadlocks a node that was not drained: the kubelet
// cannot unprepare them while no plugin is registered. While any is held,
// /readyz fails naming them, and a Warning event ReferenceDriverClaims on
// the Node says the same; once none is, the checkpoint is renamed and a
// Normal event ReferenceDriverClaimsGone is posted.

// Node event reasons of the take-over.
const (
	ReasonReferenceDriverClaims     = "ReferenceDriverClaims"
	ReasonReferenceDriverClaimsGone = "ReferenceDriverClaimsGone"
)

// DefaultReferencePoll is how often a checkpoint that cannot be read is
// read again, and how often held claims with a name are looked up in the
// API server.
const DefaultReferencePoll = 10 * time.Second

// referenceTakeover is the reference driver's claims this plugin holds.
type referenceTakeover struct {
	cfg   Config
	cp    *refdriver.Checkpoint
	since time.Time

	mu sync.Mutex // guards the rest; held across a release
	// held are the claims that may be in use, by UID; released the UIDs
	// of the checkpoint this plugin has released (refdriver.ReleasedFile).
	held     map[types.UID]refdriver.Claim
	released map[string]bool
	// gone are held claims the API server says are gone, to be released
	// once the driver runs.
	gone []types.UID
	// book is set by hold.
	book     *ledger.Ledger
	reported string
	done     bool
	// unwire takes the take-over out of the driver's prepare and
	// unprepare path (wireReference), once done.
	unwire func()
}

// wireReference puts the take-over into the kubelet's prepare and
// unprepare path (Driver.ref) while it holds anything: the take-over is a
// one-time event of a node, and once none of NVIDIA's claims is held every
// claim goes straight to this plugin's own prepare and unprepare. A node
// that never ran NVIDIA's plugin never has it in the path.
func (d *Driver) wireReference(t *referenceTakeover) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return
	}
	t.unwire = func() { d.ref.CompareAndSwap(t, nil) }
	d.ref.Store(t)
}

// readReference reads the reference driver's checkpoint before anything
// else happens. It returns nil when there is nothing to take over (no
// checkpoint, or its claims are of an earlier boot or all released, and
// the checkpoint is renamed). A checkpoint it cannot read keeps it
// waiting: it cannot tell what is in use.
func readReference(ctx context.Context, cfg Config) (*referenceTakeover, error) {
	logger := klog.FromContext(ctx)
	status := cfg.ReferenceWait
	if status == nil {
		status = func(string) {}
	}
	since, reported := time.Now(), ""
	for attempt := 1; ; attempt++ {
		cp, err := refdriver.ReadCheckpoint(cfg.PluginDir)
		var released map[string]bool
		if err == nil && cp != nil {
			released, err = refdriver.Released(cfg.PluginDir)
		}
		if err == nil {
			if cp == nil {
				return nil, nil // the common case: never the reference driver's node
			}
			status("")
			return newTakeover(ctx, cfg, cp, released, since), nil
		}
		msg := fmt.Sprintf("cannot tell which claims NVIDIA's reference DRA driver still has prepared on this node: %v; the plugin does not start (it would publish and could reuse devices in use) until the file can be read or is gone: drain the node (kubectl drain %s), then remove or rename the file", err, cfg.NodeName)
		if msg != reported {
			reported = msg
			logger.Error(err, "Not starting: NVIDIA's reference driver's checkpoint cannot be read")
			recordNodeEvent(ctx, cfg.Client, cfg.NodeName, v1.EventTypeWarning, ReasonReferenceDriverClaims, truncate(msg))
		}
		status(fmt.Sprintf("waiting since %s (attempt %d): %s", since.Format(time.RFC3339), attempt, msg))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(cmp.Or(cfg.ReferencePoll, DefaultReferencePoll)):
		}
	}
}

// referenceBootID is the boot ID the reference driver compared its
// checkpoint's with: the kernel's (device_state.go, NewDeviceState, through
// k8s.io/.../bootid GetCurrentBootID, which reads
// /proc/sys/kernel/random/boot_id), whatever this plugin simulates. A
// simulated node's own boot ID (Backend.BootIDFile) is not it.
func referenceBootID(logger klog.Logger, cfg Config) string {
	return readBootID(logger, cmp.Or(cfg.BootIDFile, DefaultBootIDFile))
}

func newTakeover(ctx context.Context, cfg Config, cp *refdriver.Checkpoint, released map[string]bool, since time.Time) *referenceTakeover {
	logger := klog.FromContext(ctx)
	t := &referenceTakeover{cfg: cfg, cp: cp, since: since, held: map[types.UID]refdriver.Claim{}, released: released}
	if boot := referenceBootID(logger, cfg); cp.NodeBootID != "" && boot != "" && cp.NodeBootID != boot {
		// The reference driver itself drops such claims
		// (NewDeviceState: "Invalidating checkpoint"), and no container
		// of an earlier boot runs.
		logger.Info("NVIDIA's reference driver's checkpoint is of an earlier boot; none of its claims is in use", "checkpointBootID", cp.NodeBootID, "bootID", boot, "listed", len(cp.Claims))
	} else {
		for _, c := range cp.Claims {
			if !released[c.UID] {
				t.held[types.UID(c.UID)] = c
			}
		}
		t.gone = goneReferenceClaims(ctx, cfg, t.held)
	}
	return t
}

// goneReferenceClaims are the held claims that no container can use any
// more, as the API server says: deleted, replaced (another UID) or no
// longer allocated the devices the reference driver prepared. The
// resource claim controller removes a pod's reservation only when the pod
// is gone or in a terminal phase, then deallocates the claim or, for a
// pod's generated claim, deletes it (k8s.io/kubernetes
// pkg/controller/resourceclaim/controller.go, syncClaim and isPodDone).
// Claims without a name (every prepared claim in the reference driver's
// checkpoint, see refdriver.preparedClaim) cannot be looked up: the
// kubelet's unprepare releases them.
func goneReferenceClaims(ctx context.Context, cfg Config, held map[types.UID]refdriver.Claim) []types.UID {
	var gone []types.UID
	for uid, c := range held {
		if c.Name == "" || cfg.Client == nil {
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, prepare.APITimeout)
		claim, err := cfg.Client.ResourceV1().ResourceClaims(c.Namespace).Get(callCtx, c.Name, metav1.GetOptions{})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			gone = append(gone, uid)
		case err != nil:
			klog.FromContext(ctx).V(2).Info("Cannot look up a claim of the reference driver; it stays held", "claim", c.String(), "err", err.Error())
		case claim.UID != uid || !sameAllocation(cfg.DriverName, claim.Status.Allocation, c.Allocation):
			gone = append(gone, uid)
		}
	}
	slices.Sort(gone)
	return gone
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

// message says what is held and why, for the log, the event and /readyz;
// the caller holds t.mu.
func (t *referenceTakeover) messageLocked() string {
	claims := make([]refdriver.Claim, 0, len(t.held))
	for _, c := range t.held {
		claims = append(claims, c)
	}
	slices.SortFunc(claims, func(a, b refdriver.Claim) int { return strings.Compare(a.UID, b.UID) })
	names, mig, specs := make([]string, 0, len(claims)), 0, 0
	for _, c := range claims {
		names = append(names, c.String())
		mig += len(c.Mig)
		if _, err := os.Stat(refdriver.SpecFile(t.cfg.CDIDir, t.cfg.DriverName, c.UID)); err == nil {
			specs++
		}
	}
	return fmt.Sprintf("holding %d claim(s) that NVIDIA's reference DRA driver prepared on this node and that may be in use (%s; %d MIG device(s) and %d CDI spec(s) of its own), listed in %s: their devices are prepared for no other claim; each is released when the kubelet unprepares it (its pods end) or the API server has it deleted or deallocated",
		len(claims), strings.Join(names, ", "), mig, specs, t.cp.Path)
}

// report says what is held, once per change: log, Node event, the status
// /readyz reads. The caller holds t.mu.
func (t *referenceTakeover) reportLocked(ctx context.Context) {
	msg := t.messageLocked()
	if msg == t.reported {
		return
	}
	t.reported = msg
	klog.FromContext(ctx).Info("Taking over NVIDIA's reference driver's claims in use", "problem", msg)
	recordNodeEvent(ctx, t.cfg.Client, t.cfg.NodeName, v1.EventTypeWarning, ReasonReferenceDriverClaims, truncate(msg))
}

// NotReady is why /readyz fails while claims are held, nil after.
func (t *referenceTakeover) NotReady() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || len(t.held) == 0 {
		return nil
	}
	return fmt.Errorf("since %s: %s", t.since.Format(time.RFC3339), t.reported)
}

func truncate(msg string) string {
	const maxMessage = 1024 // events are for humans; the log has everything
	if len(msg) > maxMessage {
		return msg[:maxMessage-3] + "..."
	}
	return msg
}
