// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// Capacity names a memory-fraction claim consumes.
const (
	capMemory  resourceapi.QualifiedName = "memory"
	capCompute resourceapi.QualifiedName = "computePercentage"
)

// SharingConfig wires sharing into a State.
type SharingConfig struct {
	TimeSlicer sharing.TimeSlicer
	MPS        *sharing.MPS
	// Allowed lists the strategies this node offers.
	Allowed map[configapi.SharingStrategy]bool
	// NodeName is used in errors.
	NodeName string
}

// deviceMemory is the memory a device has: the GPU's, or the MIG profile's.
func deviceMemory(dev *AllocatableDevice) int64 { return dev.Behavior().Memory(dev) }

// resolveSharing decides what sharing to apply to one allocated device.
// A memory-fraction allocation (a share of a shareable GPU) always runs
// under MPS with its consumed memory as the pinned-memory limit; a share
// of a GPU offered for integer or unlimited consumable shares is
// time-sliced (timeSlicedShare).
func (s *State) resolveSharing(cfg configapi.Config, dev *AllocatableDevice, r resourceapi.DeviceRequestAllocationResult, index int) (*checkpoint.SharingRecord, error) {
	sh := cfg.GetSharing()
	if sh != nil || r.ShareID != nil {
		if err := dev.Behavior().CheckSharing(dev); err != nil {
			return nil, err
		}
	}
	target := mpsTarget(dev)
	if r.ShareID != nil && dev.TimeSlicedShares != "" {
		return s.timeSlicedShare(sh, dev)
	}
	if r.ShareID != nil {
		if sh != nil && sh.Strategy != configapi.MpsStrategy {
			return nil, fmt.Errorf("sharing.strategy: %s cannot enforce a memory share; memory-fraction claims run under MPS (consumable shares in mode memory too), so set strategy: MPS or leave sharing out", sh.Strategy)
		}
		if err := s.checkAllowed(configapi.MpsStrategy, true); err != nil {
			return nil, err
		}
		rec, err := shareLimits(r, dev, target)
		if err != nil {
			return nil, err
		}
		if rec.ActiveThreadPercentage == 0 && sh != nil && sh.MpsConfig != nil && sh.MpsConfig.DefaultActiveThreadPercentage != nil {
			rec.ActiveThreadPercentage = *sh.MpsConfig.DefaultActiveThreadPercentage
		}
		return rec, nil
	}
	if sh == nil {
		return nil, nil
	}
	if err := s.checkAllowed(sh.Strategy, false); err != nil {
		return nil, err
	}
	switch sh.Strategy {
	case configapi.TimeSlicingStrategy:
		// The time slice is a property of the physical GPU: on a MIG
		// device it would change the scheduling of every other tenant of
		// the parent GPU. NVIDIA's driver refuses it ("can only set the
		// time-slice interval on full GPUs", k8s-dra-driver-gpu
		// cmd/gpu-kubelet-plugin/sharing.go). Processes on one MIG device
		// take turns at the default interval anyway, so TimeSlicing with
		// the Default interval is accepted there and changes nothing.
		if !dev.Behavior().OwnsTimeSlice() {
			if iv := sh.TimeSlicingConfig.Interval; iv != configapi.DefaultTimeSlice {
				return nil, fmt.Errorf("sharing.timeSlicingConfig.interval: %s cannot be set on MIG device %s: the time slice belongs to the whole GPU %s and would change it for every other MIG device on it; leave the interval out (Default) or use a whole GPU", iv, dev.Name, dev.GPU.UUID)
			}
			return nil, nil
		}
		return &checkpoint.SharingRecord{Strategy: sh.Strategy, Target: dev.GPU.UUID, Interval: sh.TimeSlicingConfig.Interval}, nil
	case configapi.MpsStrategy:
		rec := &checkpoint.SharingRecord{Strategy: sh.Strategy, Target: target}
		m := sh.MpsConfig
		if m.DefaultActiveThreadPercentage != nil {
			rec.ActiveThreadPercentage = *m.DefaultActiveThreadPercentage
		}
		field, limit := "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", m.DefaultPinnedDeviceMemoryLimit
		for _, key := range perDeviceKeys(dev, index) {
			if q, ok := m.DefaultPerDevicePinnedMemoryLimit[key]; ok {
				field, limit = fmt.Sprintf("sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[%q]", key), &q
			}
		}
		if limit != nil {
			if limit.Value() > deviceMemory(dev) {
				return nil, fmt.Errorf("%s: %s exceeds the %s of device %s", field, limit.String(), formatBytes(deviceMemory(dev)), dev.Name)
			}
			rec.PinnedMemoryBytes = limit.Value()
		}
		return rec, nil
	}
	return nil, fmt.Errorf("sharing.strategy: unknown strategy %q", sh.Strategy)
}

// mpsTarget is the device an MPS daemon runs for: the GPU, or the MIG
// device. A dynamic MIG device gets its UUID only at prepare, which fills
// the target in then.
func mpsTarget(dev *AllocatableDevice) string { return dev.Behavior().ShareTarget(dev) }

// perDeviceKeys are the defaultPerDevicePinnedMemoryLimit keys that select a
// device: its UUID, when known before prepare, and its index among the
// claim's devices of this driver. The later key wins.
func perDeviceKeys(dev *AllocatableDevice, index int) []string {
	if t := mpsTarget(dev); t != "" {
		return []string{t, strconv.Itoa(index)}
	}
	return []string{strconv.Itoa(index)}
}

// hundred is the most compute a share can consume, in percent.
var hundred = resource.MustParse("100")

// shareLimits turns the capacity a memory-fraction share consumes into its
// MPS client limits. The consumed memory is the share's only memory limit:
// a missing, non-positive, sub-MiB or overflowing value would mean no limit
// at all, so each is an error (the scheduler never allocates one).
func shareLimits(r resourceapi.DeviceRequestAllocationResult, dev *AllocatableDevice, target string) (*checkpoint.SharingRecord, error) {
	field := fmt.Sprintf("consumedCapacity[%q]", capMemory)
	mem, ok := r.ConsumedCapacity[capMemory]
	if !ok {
		return nil, fmt.Errorf("%s: missing; a memory-fraction share is limited to the memory it consumes, so this allocation is incomplete: reallocate the claim", field)
	}
	if err := configapi.ValidatePinnedMemoryLimit(field, mem); err != nil {
		return nil, err
	}
	if mem.Value() > deviceMemory(dev) {
		return nil, fmt.Errorf("%s: %s exceeds the %s of device %s", field, mem.String(), formatBytes(deviceMemory(dev)), dev.Name)
	}
	rec := &checkpoint.SharingRecord{Strategy: configapi.MpsStrategy, Target: target, PinnedMemoryBytes: mem.Value()}
	if q, ok := r.ConsumedCapacity[capCompute]; ok {
		if q.Sign() < 0 || q.Cmp(hundred) > 0 {
			return nil, fmt.Errorf("consumedCapacity[%q]: %s is outside 0-100; request computePercentage as a percentage of the GPU, e.g. 40", capCompute, q.String())
		}
		// 0 sets no compute limit of the share's own.
		rec.ActiveThreadPercentage = int(q.Value())
	}
	return rec, nil
}

func (s *State) checkAllowed(strategy configapi.SharingStrategy, fractional bool) error {
	if s.Sharing == nil || !s.Sharing.Allowed[strategy] {
		node := ""
		if s.Sharing != nil {
			node = s.Sharing.NodeName
		}
		if fractional {
			return fmt.Errorf("memory-fraction sharing needs MPS, which node %s does not offer; an admin enables it with --sharing-strategies=MPS (chart value sharing.strategies)", node)
		}
		return fmt.Errorf("sharing.strategy: %s is not enabled on node %s; an admin enables it with --sharing-strategies (chart value sharing.strategies)", strategy, node)
	}
	return nil
}

func formatBytes(b int64) string { return fmt.Sprintf("%dMi", b>>20) }

// applySharing applies a resolved setting and returns the CDI edits the
// container needs for it.
func (s *State) applySharing(namespace string, rec *checkpoint.SharingRecord) (extraEdits, error) {
	if rec == nil {
		return extraEdits{}, nil
	}
	switch rec.Strategy {
	case configapi.TimeSlicingStrategy:
		return extraEdits{}, s.Sharing.TimeSlicer.SetTimeSlice(rec.Target, rec.Interval)
	case configapi.MpsStrategy:
		d := s.Sharing.MPS.Daemon(rec.Target)
		d.Defaults = settingsOf(rec)
		d.Namespace = namespace // the claim's: a daemon serves one namespace unless the chart allows more
		if err := s.Sharing.MPS.Ensure(d); err != nil {
			return extraEdits{}, err
		}
		return mpsEdits(s.Sharing.MPS, rec)
	}
	return extraEdits{}, nil
}

// mpsEdits are the CDI edits of an MPS client: they name the daemon's
// directories, so they need no running daemon.
func mpsEdits(m *sharing.MPS, rec *checkpoint.SharingRecord) (extraEdits, error) {
	if err := sharing.CheckDeviceUUID(rec.Target); err != nil {
		return extraEdits{}, err
	}
	return extraEdits(sharing.ClientEdits(m.Daemon(rec.Target), settingsOf(rec))), nil
}

// timeSliceConflict refuses a time slice other than the one another
// prepared claim set on the same GPU: the slice belongs to the whole GPU,
// so the last claim to prepare would silently change it for the others.
// The caller holds the GPU's lock, so the records it reads are settled.
func (s *State) timeSliceConflict(claim types.UID, rec *checkpoint.SharingRecord) error {
	if rec == nil || rec.Strategy != configapi.TimeSlicingStrategy {
		return nil
	}
	other, holder := s.sharedWith(claim, rec)
	if other == nil || other.Interval == rec.Interval {
		return nil
	}
	return fmt.Errorf("sharing.timeSlicingConfig.interval: %s conflicts with interval %s, which claim %s/%s already set on GPU %s; the time slice belongs to the whole GPU, so every claim on it must ask for the same interval (or leave sharing out)",
		rec.Interval, other.Interval, holder.Namespace, holder.Name, rec.Target)
}

func settingsOf(rec *checkpoint.SharingRecord) sharing.Settings {
	return sharing.Settings{Strategy: rec.Strategy, Interval: rec.Interval, ActiveThreadPercentage: rec.ActiveThreadPercentage, PinnedMemoryBytes: rec.PinnedMemoryBytes}
}

// releaseSharing undoes a setting when no other prepared claim relies on it:
// the time slice goes back to Default, the MPS daemon stops.
func (s *State) releaseSharing(claim types.UID, rec *checkpoint.SharingRecord) error {
	// No target yet: a dynamic MIG device that was never created, so
	// nothing was applied to it.
	if rec == nil || rec.Target == "" || s.Sharing == nil {
		return nil
	}
	if other, _ := s.sharedWith(claim, rec); other != nil {
		// Claims that remain keep theirs: an interval set by this claim
		// alone (records from before conflicts were refused) goes back
		// to what the remaining claims asked for.
		if rec.Strategy == configapi.TimeSlicingStrategy && other.Interval != rec.Interval {
			return s.Sharing.TimeSlicer.SetTimeSlice(rec.Target, other.Interval)
		}
		return nil
	}
	switch rec.Strategy {
	case configapi.TimeSlicingStrategy:
		return s.Sharing.TimeSlicer.SetTimeSlice(rec.Target, configapi.DefaultTimeSlice)
	case configapi.MpsStrategy:
		return s.Sharing.MPS.Stop(s.Sharing.MPS.Daemon(rec.Target))
	}
	return nil
}

// sharedWith returns the setting (and its claim) of another owning record
// (the ledger's view) that uses the same strategy on the same device, or nil.
func (s *State) sharedWith(claim types.UID, rec *checkpoint.SharingRecord) (*checkpoint.SharingRecord, *checkpoint.PreparedClaim) {
	return s.Ledger.View().Sharing(claim, rec)
}

// SuperviseSharing restarts MPS daemons of prepared claims that died, for
// example with an earlier plugin container during a rolling update, until
// ctx ends. It is the node's one periodic pass over the ledger, so it also
// releases, once their GPU answers again, what unprepares left on lost
// GPUs (ReleaseLeftovers), on nodes without sharing too: within one pass
// of the GPU's return, as the health monitor's poll sees it.
func (s *State) SuperviseSharing(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		// Errors are logged per leftover; a leftover that fails is tried
		// again next pass.
		if _, err := s.ReleaseLeftovers(ctx); errors.Is(err, checkpoint.ErrSuperseded) {
			return
		}
		// The first pass starts the daemons of claims restored at start,
		// which does not wait for them.
		err := s.SuperviseSharingOnce(ctx)
		if errors.Is(err, checkpoint.ErrSuperseded) {
			return // the newer plugin instance supervises from now on
		}
		if err != nil {
			klog.FromContext(ctx).Error(err, "Supervising MPS daemons")
		}
	}
}

// SuperviseSharingOnce is one pass of SuperviseSharing: it restarts the
// dead MPS daemons of prepared claims, holding the state like a prepare.
func (s *State) SuperviseSharingOnce(ctx context.Context) error {
	if s.Sharing == nil {
		return nil
	}
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	s.superviseOnce(ctx)
	return nil
}

// superviseOnce restarts the dead MPS daemons of prepared claims. Each
// daemon is looked at once per pass, however many claims share it (a look
// at a daemon pod is an API request).
func (s *State) superviseOnce(ctx context.Context) {
	seen := map[string]bool{}
	for _, rec := range s.Ledger.Claims() {
		if rec.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range rec.Devices {
			if d.Sharing == nil || d.Sharing.Strategy != configapi.MpsStrategy || seen[d.Sharing.Target] {
				continue
			}
			if s.superviseDevice(ctx, rec, d) {
				seen[d.Sharing.Target] = true
			}
		}
	}
}

// superviseDevice ensures the MPS daemon of one device of a listed claim,
// under the lock prepare and unprepare hold, and reports whether it
// looked. The claim may have been unprepared since the list was taken, or
// unprepared and prepared again with another allocation (same UID): only
// the same allocation's daemon is started again.
func (s *State) superviseDevice(ctx context.Context, listed checkpoint.PreparedClaim, d checkpoint.PreparedDevice) bool {
	// The lock of the record's own GPU (the parent of a MIG device),
	// whatever the node publishes under the device's name; none where
	// that hardware is gone (a lost GPU has no daemon to run).
	gpu := ledger.Of(d).GPU
	if gpu == "" || s.liveDeviceOrNil(d) == nil {
		return false
	}
	defer s.deviceLocks.Lock(gpu)()
	cur, still := s.Ledger.Get(listed.UID)
	if !still || cur.State != checkpoint.PrepareCompleted || !sameAllocation(cur.Devices, listed.Devices) || !sameSharing(cur.Devices, d) {
		return false
	}
	if _, err := s.applySharing(listed.Namespace, d.Sharing); err != nil {
		klog.FromContext(ctx).Error(err, "Restarting MPS daemon", "device", d.Device)
	}
	return true
}

// sameSharing reports whether the current record still applies d's
// sharing setting to the same device.
func sameSharing(current []checkpoint.PreparedDevice, d checkpoint.PreparedDevice) bool {
	for _, c := range current {
		if c.Device == d.Device && c.Sharing != nil && *c.Sharing == *d.Sharing {
			return true
		}
	}
	return false
}
