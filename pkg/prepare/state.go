// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package prepare turns allocated ResourceClaims into configured devices and
// CDI device IDs, and undoes that on unprepare. Claims are locked per claim
// and per device, never node-wide across I/O, so unrelated claims prepare
// in parallel.
package prepare

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/step"
)

// AllocatableDevice is a device this node publishes and can prepare; what
// preparing it means is its kind's (devkind).
type AllocatableDevice = devkind.Device

// StatusReporter publishes what was prepared into the claim's status. It
// must not block: the kubelet does not wait for it. Nothing is reported on
// unprepare: the resourceclaim controller clears the device status when it
// removes the allocation, and most claims are deleted at that point anyway.
type StatusReporter interface {
	Prepared(claim *resourceapi.ResourceClaim, devices []checkpoint.PreparedDevice)
}

// Config wires a State.
type Config struct {
	DriverName string
	PoolName   string
	Devices    map[string]*AllocatableDevice
	// Ledger holds the checkpoint: every write of a record goes through it.
	Ledger *ledger.Ledger
	CDI    *cdi.Writer
	Status StatusReporter
	// Sharing is nil on nodes that offer no sharing.
	Sharing *SharingConfig
	// Fence, when set, is entered around every prepare and unprepare so
	// that a newer plugin instance on the node (rolling update) takes over
	// cleanly.
	Fence *checkpoint.Fence
	// BootID identifies the node's current boot; records carry the boot
	// they were prepared in, so that a start after a reboot restores them
	// (restore.go). Empty when unknown.
	BootID string
	// Passthrough is nil on nodes that offer no GPU for passthrough.
	Passthrough *PassthroughConfig
}

// State prepares and unprepares claims on one node.
type State struct {
	Config
	claimLocks  *keyedLocks
	deviceLocks *keyedLocks
}

// New builds the state; call Recover before serving the kubelet.
func New(c Config) *State {
	return &State{Config: c, claimLocks: newKeyedLocks(), deviceLocks: newKeyedLocks()}
}

// Prepare prepares one claim and returns its CDI devices. It is idempotent:
// a claim already prepared returns the same IDs without touching anything.
func (s *State) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if !checkpoint.ValidToken(string(claim.UID)) {
		return nil, step.Errorf(step.Claim, "claim UID %q is not a valid UID", claim.UID)
	}
	leave, err := s.enter()
	if err != nil {
		return nil, step.Wrap(step.Fence, err)
	}
	defer leave()
	unlockClaim := s.claimLocks.Lock(string(claim.UID))
	defer unlockClaim()

	if err := s.Ledger.NewerError(claim.UID); err != nil {
		return nil, step.Wrap(step.Checkpoint, err)
	}
	if rec, ok := s.Ledger.Get(claim.UID); ok {
		if rec.Prepared() && s.allocatedAsRecorded(claim, rec) {
			// Kept: restored where start could not (its placement may be
			// free now), otherwise answered from the record as it is.
			if rec.State == checkpoint.RestorePending || s.Ledger.UnrestoredErr(rec.UID) != nil {
				if _, err := s.reconcile(ctx, rec, held, serving); err != nil {
					return nil, step.Wrap(step.Restore, err)
				}
			}
			// Written again (coalesced, in the background): a plugin killed
			// right after the first prepare may never have written it.
			s.Status.Prepared(claim, rec.Devices)
			return kubeletDevices(rec.Devices), nil
		}
		// A previous attempt died half-way, or the record is of an earlier
		// allocation of this claim: undo it before preparing afresh.
		if _, err := s.reconcile(ctx, rec, released, serving); err != nil {
			return nil, step.Errorf(step.Rollback, "roll back earlier attempt: %w", err)
		}
	}

	planned, records, err := s.plan(claim) // its errors carry their step
	if err != nil {
		return nil, err
	}
	unlockDevices := s.deviceLocks.Lock(lockKeys(planned)...)
	defer unlockDevices()

	rec := checkpoint.PreparedClaim{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name, State: checkpoint.PrepareStarted, Devices: records, BootID: s.BootID}
	begin := s.Ledger.BeginUnwritten // nothing to roll back: no write ahead
	if writeAhead(planned, records) {
		begin = s.Ledger.Begin
	}
	if err := begin(rec); err != nil {
		return nil, step.Wrap(step.Reserve, err)
	}

	devices, err := s.prepareDevices(ctx, &rec, planned)
	if err != nil {
		// The claim's intent is nothing again; the device locks are held.
		if _, rbErr := s.reconcileLocked(ctx, rec, released, serving); rbErr != nil {
			klog.FromContext(ctx).Error(rbErr, "Rolling back failed prepare", "claim", klog.KObj(claim))
			// Keep what was created on record, so that the kubelet's
			// retry (or the next start) rolls it back.
			rec.State = checkpoint.PrepareStarted
			_ = s.Ledger.Record(rec)
		}
		return nil, err
	}
	s.Status.Prepared(claim, rec.Devices)
	return devices, nil
}

// prepareDevices configures the devices (creating MIG devices where
// needed), writes the CDI spec and records the claim as completed. rec is
// updated as devices are created so that a rollback can undo them.
func (s *State) prepareDevices(_ context.Context, rec *checkpoint.PreparedClaim, planned []plannedDevice) ([]kubeletplugin.Device, error) {
	for i := range planned {
		p := &planned[i]
		if err := p.device.Behavior().Configure(s.env(true), &rec.Devices[i], p.device); err != nil {
			// Configure changes MIG devices, MIG mode and a VM GPU's
			// binding: the step that configures the GPU (step.MIG).
			return nil, step.Errorf(step.MIG, "device %s: %w", p.device.Name, err)
		}
		if sh := rec.Devices[i].Sharing; sh != nil && sh.Target == "" {
			sh.Target = rec.Devices[i].UUID // a dynamic MIG device's UUID is known now
		}
		if err := s.timeSliceConflict(rec.UID, rec.Devices[i].Sharing); err != nil {
			return nil, step.Errorf(step.Sharing, "device %s: %w", p.device.Name, err)
		}
		extra, err := s.applySharing(rec.Namespace, rec.Devices[i].Sharing)
		if err != nil {
			return nil, step.Errorf(step.Sharing, "device %s: %w", p.device.Name, err)
		}
		p.extra = extra
	}
	// IDs are derived from the claim UID and device name, so the record
	// stored in the spec's annotations carries them before the spec is
	// written, and the spec names its devices to match.
	rec.State = checkpoint.PrepareCompleted
	for i := range rec.Devices {
		rec.Devices[i].CDIDeviceIDs = []string{s.CDI.DeviceID(rec.UID, rec.Devices[i].Device)}
	}
	if err := s.writeSpec(*rec, planned); err != nil {
		return nil, step.Errorf(step.CDI, "write CDI spec: %w", err)
	}
	if err := s.Ledger.Record(*rec); err != nil {
		return nil, step.Wrap(step.Checkpoint, err)
	}
	return kubeletDevices(rec.Devices), nil
}

// Unprepare undoes Prepare. Unknown claims are not an error.
func (s *State) Unprepare(ctx context.Context, claim kubeletplugin.NamespacedObject) error {
	if !checkpoint.ValidToken(string(claim.UID)) {
		return fmt.Errorf("claim UID %q is not a valid UID", claim.UID)
	}
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	unlockClaim := s.claimLocks.Lock(string(claim.UID))
	defer unlockClaim()
	if err := s.Ledger.NewerError(claim.UID); err != nil {
		return err // a newer driver's claim: its spec and devices are its own
	}
	rec, ok := s.Ledger.Get(claim.UID)
	if !ok {
		// Nothing recorded; still make sure no spec lingers.
		return s.CDI.Remove(claim.UID)
	}
	_, err = s.reconcile(ctx, rec, released, serving)
	return err
}

// enter joins the node-wide fence for one call; see checkpoint.Fence.
func (s *State) enter() (func(), error) {
	if s.Fence == nil {
		return func() {}, nil
	}
	return s.Fence.Enter()
}

// kubeletDevices is what NodePrepareResources returns for a claim. A share
// of a device (consumable capacity) carries its share ID: the kubelet
// keeps it and reports it in PodResources (k8s.io/kubernetes
// pkg/kubelet/cm/dra/manager.go prepareResources, container_manager_linux.go
// GetDynamicResources), where monitoring tells the shares of one GPU apart.
func kubeletDevices(devs []checkpoint.PreparedDevice) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(devs))
	for _, d := range devs {
		kd := kubeletplugin.Device{
			Requests:     d.Requests,
			PoolName:     d.Pool,
			DeviceName:   d.Device,
			CDIDeviceIDs: d.CDIDeviceIDs,
		}
		if d.ShareID != "" {
			kd.ShareID = ptr.To(types.UID(d.ShareID))
		}
		out = append(out, kd)
	}
	return out
}
