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
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
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
			if err := s.retryRestore(ctx, rec); err != nil {
				return nil, step.Wrap(step.Restore, err)
			}
			// Written again (coalesced, in the background): a plugin killed
			// right after the first prepare may never have written it.
			s.Status.Prepared(claim, rec.Devices)
			return kubeletDevices(rec.Devices), nil
		}
		// A previous attempt died half-way, or the record is of an earlier
		// allocation of this claim: undo it before preparing afresh.
		if err := s.unprepare(ctx, rec); err != nil {
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
	if err := s.Ledger.Begin(rec); err != nil {
		return nil, step.Wrap(step.Reserve, err)
	}

	devices, err := s.prepareDevices(ctx, &rec, planned)
	if err != nil {
		// The device locks are held: undo directly. Going through
		// unprepare would lock them a second time and hang.
		if rbErr := s.undo(rec); rbErr != nil {
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
			// configureDevice changes MIG devices and MIG mode only.
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
	return s.unprepare(ctx, rec)
}

// enter joins the node-wide fence for one call; see checkpoint.Fence.
func (s *State) enter() (func(), error) {
	if s.Fence == nil {
		return func() {}, nil
	}
	return s.Fence.Enter()
}

// unprepare locks the devices of a (possibly partial) prepare and undoes
// it. The caller holds the claim lock and no device lock.
func (s *State) unprepare(_ context.Context, rec checkpoint.PreparedClaim) error {
	defer s.lockRecordDevices(rec)()
	return s.undo(rec)
}

// rollBackAtStart undoes an interrupted prepare before the kubelet is
// served. It never waits for the API server: an MPS daemon (a pod) is not
// stopped here but left unowned, and RemoveStale stops it in the
// background.
func (s *State) rollBackAtStart(rec checkpoint.PreparedClaim) error {
	defer s.lockRecordDevices(rec)()
	return s.undoAs(rec, true)
}

// lockRecordDevices locks the GPUs a record's devices occupy (by UUID,
// published or not), and returns the unlock.
func (s *State) lockRecordDevices(rec checkpoint.PreparedClaim) func() {
	keys := make([]string, 0, len(rec.Devices))
	for _, f := range ledger.Footprints(rec) {
		if f.GPU != "" {
			keys = append(keys, f.GPU)
		}
	}
	return s.deviceLocks.Lock(keys...)
}

// undo reverses every step of a (possibly partial) prepare. The caller
// holds the claim lock and the locks of the claim's devices.
func (s *State) undo(rec checkpoint.PreparedClaim) error { return s.undoAs(rec, false) }

func (s *State) undoAs(rec checkpoint.PreparedClaim, atStart bool) error {
	if err := s.markUnbinding(&rec); err != nil {
		return err
	}
	if err := s.CDI.Remove(rec.UID); err != nil {
		return err
	}
	env := s.env(s.addressTrusted(rec))
	for _, d := range rec.Devices {
		if atStart && d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy {
			continue // stopped as unowned, in the background
		}
		if err := s.releaseSharing(rec.UID, d.Sharing); err != nil {
			return fmt.Errorf("device %s: %w", d.Device, err)
		}
		// Released by the kind the record says, from the record: a device
		// no longer published (its GPU fell off the bus, or a chart value
		// changed) is released as far as its kind can without it.
		if err := devkind.OfRecord(d).Release(env, d, s.Devices[d.Device]); err != nil {
			return fmt.Errorf("device %s: %w", d.Device, err)
		}
	}
	return s.Ledger.Release(rec.UID)
}

// retryRestore tries again to restore a claim that start-up could not
// restore (its placement may be free now); the caller holds the claim lock.
func (s *State) retryRestore(ctx context.Context, rec checkpoint.PreparedClaim) error {
	if rec.State != checkpoint.RestorePending && s.Ledger.UnrestoredErr(rec.UID) == nil {
		return nil
	}
	defer s.lockRecordDevices(rec)()
	_, err := s.restore(klog.FromContext(ctx), rec)
	return err
}

func kubeletDevices(devs []checkpoint.PreparedDevice) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, 0, len(devs))
	for _, d := range devs {
		out = append(out, kubeletplugin.Device{
			Requests:     d.Requests,
			PoolName:     d.Pool,
			DeviceName:   d.Device,
			CDIDeviceIDs: d.CDIDeviceIDs,
		})
	}
	return out
}
