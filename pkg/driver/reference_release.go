// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
)

// hold puts the held claims into the ledger as foreign claims, before the
// device table is built and before start-up looks for unowned MIG devices.
// A MIG device of a claim is held by its slices, read from the live GPU
// (the reference driver records only its GPU instance); one that no longer
// exists holds nothing. dynamicMIG says whether this plugin partitions
// GPUs dynamically: then the reference driver's MIG devices are dynamic
// ones, destroyed at release, as this plugin's own would be.
func (t *referenceTakeover) hold(book *ledger.Ledger, inv *nvdev.Inventory, dynamicMIG bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.book = book
	gpus := map[string]*nvdev.GPU{}
	for _, g := range inv.GPUs {
		gpus[g.UUID] = g
	}
	for uid, c := range t.held {
		if _, own := book.Get(uid); own {
			// This plugin prepared the claim itself after NVIDIA's
			// prepare of it had only begun (the kubelet asked again):
			// its own record holds it. Holding NVIDIA's part too would
			// replace that hold (the ledger holds one set per UID);
			// the release of NVIDIA's part still happens.
			continue
		}
		rec := checkpoint.PreparedClaim{UID: uid, Namespace: c.Namespace, Name: c.Name}
		for _, d := range c.Devices {
			// A share of a device several of NVIDIA's claims use at once
			// (its ConsumableShares) is held as one share: the others
			// are held beside it.
			pd := checkpoint.PreparedDevice{Requests: d.Requests, Pool: d.Pool, Device: d.Name, Type: configapi.WholeGPU, UUID: d.GPU, Shared: d.ShareID != "", ShareID: d.ShareID}
			if d.Mig != nil {
				m, ok := liveMig(gpus[d.GPU], *d.Mig)
				if !ok {
					continue
				}
				pd.Type, pd.UUID = configapi.MIG, m.UUID
				pd.Mig = &checkpoint.MigRecord{ParentUUID: d.GPU, Profile: m.Profile.Name, Start: m.Placement.Start, Size: m.Placement.Size, Dynamic: dynamicMIG, GIID: m.GIID, CIID: m.CIID}
			}
			rec.Devices = append(rec.Devices, pd)
		}
		if err := book.HoldForeign(rec); err != nil {
			klog.Background().Error(err, "A claim of NVIDIA's reference driver overlaps another claim", "claim", c.String())
		}
	}
}

// liveMig is the MIG device of the reference driver's record as NVML
// lists it now: the same GPU instance and, where recorded, the same UUID
// (a GPU instance ID is reused once its device is destroyed).
func liveMig(g *nvdev.GPU, rec refdriver.MigDevice) (nvdev.MigDevice, bool) {
	if g == nil {
		return nvdev.MigDevice{}, false
	}
	devices := g.MigDevices
	if g.Device != nil {
		if now, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles); err == nil {
			devices = now
		}
	}
	for _, m := range devices {
		if m.GIID == rec.GIID && (rec.UUID == "" || m.UUID == rec.UUID) {
			return m, true
		}
	}
	return nvdev.MigDevice{}, false
}

// start runs once the plugin serves: it releases the claims found gone at
// start and those whose prepare the reference driver never completed (the
// kubelet was never told they are prepared, so no container uses them,
// and it prepares them again through this plugin), says what is left, and
// looks up named claims again every poll.
func (t *referenceTakeover) start(ctx context.Context) {
	t.mu.Lock()
	gone := t.gone
	for uid, c := range t.held {
		if !c.Completed() {
			gone = append(gone, uid)
		}
	}
	t.mu.Unlock()
	for _, uid := range gone {
		if err := t.release(ctx, uid, "gone from the API server or never prepared"); err != nil {
			klog.FromContext(ctx).Error(err, "Releasing a claim of NVIDIA's reference driver", "claim", uid)
		}
	}
	t.mu.Lock()
	t.finishLocked(ctx)
	if !t.done {
		t.reportLocked(ctx)
	}
	t.mu.Unlock()
	go t.poll(ctx)
}

// poll releases held claims the API server says are gone, for claims whose
// pods ended while no kubelet will ask (the kubelet's own state was lost).
func (t *referenceTakeover) poll(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(cmp.Or(t.cfg.ReferencePoll, DefaultReferencePoll)):
		}
		t.mu.Lock()
		if t.done {
			t.mu.Unlock()
			return
		}
		held := make(map[types.UID]refdriver.Claim, len(t.held))
		for uid, c := range t.held {
			held[uid] = c
		}
		t.mu.Unlock()
		for _, uid := range goneReferenceClaims(ctx, t.cfg, held) {
			if err := t.release(ctx, uid, "gone from the API server"); err != nil {
				klog.FromContext(ctx).Error(err, "Releasing a claim of NVIDIA's reference driver", "claim", uid)
			}
		}
	}
}

// prepare answers the kubelet's prepare of a held claim (the kubelet
// restarted and asks again) with the devices the reference driver
// prepared, whose CDI spec is still there. It returns false for any other
// claim.
func (t *referenceTakeover) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, bool) {
	if t == nil {
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.held[claim.UID]
	if !ok || !c.Completed() {
		return nil, false
	}
	out := make([]kubeletplugin.Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		out = append(out, kubeletplugin.Device{Requests: d.Requests, PoolName: d.Pool, DeviceName: d.Name, CDIDeviceIDs: d.CDIDeviceIDs})
	}
	return out, true
}

// unprepare answers the kubelet's unprepare of a held claim by releasing
// it. It returns false for any other claim, and for one this plugin
// prepared too (ownsLocked) once NVIDIA's part is released, so that the
// driver's own unprepare of it follows.
func (t *referenceTakeover) unprepare(ctx context.Context, claim kubeletplugin.NamespacedObject) (bool, error) {
	if t == nil {
		return false, nil
	}
	t.mu.Lock()
	c, ok := t.held[claim.UID]
	if ok && c.Name == "" { // the kubelet knows its name: say it from now on
		c.Namespace, c.Name = claim.Namespace, claim.Name
		t.held[claim.UID] = c
	}
	own := ok && t.ownsLocked(claim.UID)
	t.mu.Unlock()
	if !ok {
		return false, nil
	}
	err := t.release(ctx, claim.UID, "unprepared by the kubelet")
	if own && err == nil {
		// This plugin prepared the claim too (NVIDIA had only begun):
		// its own unprepare follows, on the common path.
		return false, nil
	}
	return true, err
}

// ownsLocked reports whether this plugin holds a claim of its own under a
// UID the take-over holds: its record, or its hold, which replaced the
// foreign one when its prepare began (ledger.Begin). The caller holds
// t.mu.
func (t *referenceTakeover) ownsLocked(uid types.UID) bool {
	if _, ok := t.book.Get(uid); ok {
		return true
	}
	_, foreign := t.book.Foreign(uid)
	return !foreign
}

// release undoes what the reference driver made for a claim, as its own
// unprepare would (undo); removes its CDI spec; then lists the claim as
// released and stops holding it. Each step is idempotent, so a failed
// release is retried whole. A hold of this plugin's own under the same
// UID (ownsLocked) is never dropped: ReleaseForeign leaves it.
func (t *referenceTakeover) release(ctx context.Context, uid types.UID, why string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.held[uid]
	if !ok {
		return nil
	}
	if err := t.undo(ctx, uid, c); err != nil {
		return fmt.Errorf("release claim %s of NVIDIA's reference driver: %w", c, err)
	}
	spec := refdriver.SpecFile(t.cfg.CDIDir, t.cfg.DriverName, c.UID)
	if err := os.Remove(spec); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release claim %s of NVIDIA's reference driver: remove its CDI spec: %w", c, err)
	}
	t.released[c.UID] = true
	if err := refdriver.WriteReleased(t.cfg.PluginDir, t.released); err != nil {
		delete(t.released, c.UID)
		return fmt.Errorf("release claim %s of NVIDIA's reference driver: record it: %w", c, err)
	}
	delete(t.held, uid)
	t.book.ReleaseForeign(uid)
	klog.FromContext(ctx).Info("Released a claim of NVIDIA's reference driver", "claim", c.String(), "why", why, "left", len(t.held))
	t.finishLocked(ctx)
	if !t.done {
		t.reportLocked(ctx)
	}
	return nil
}

// finishLocked renames the checkpoint and says so once nothing of it is
// held; the caller holds t.mu.
func (t *referenceTakeover) finishLocked(ctx context.Context) {
	if t.done || len(t.held) > 0 {
		return
	}
	logger := klog.FromContext(ctx)
	if err := t.cp.Finish(); err != nil {
		logger.Error(err, "Cannot rename NVIDIA's reference driver's checkpoint; the next start reads it again", "file", t.cp.Path)
		return
	}
	t.done = true
	if t.unwire != nil {
		t.unwire() // out of the kubelet's prepare and unprepare path
	}
	logger.Info("None of NVIDIA's reference driver's claims is held; renamed its checkpoint", "file", t.cp.Path+refdriver.MigratedSuffix, "listed", len(t.cp.Claims), "released", len(t.released))
	if t.reported == "" && len(t.released) == 0 {
		return // nothing was held: nothing to say
	}
	took := time.Since(t.since).Round(time.Second)
	msg := fmt.Sprintf("the claims NVIDIA's reference DRA driver prepared on this node are released (%d, in %v); its checkpoint is renamed to %s", len(t.released), took, t.cp.Path+refdriver.MigratedSuffix)
	recordNodeEvent(ctx, t.cfg.Client, t.cfg.NodeName, v1.EventTypeNormal, ReasonReferenceDriverClaimsGone, msg)
}
