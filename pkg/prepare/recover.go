// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// ClaimGetter looks a claim up in the API.
type ClaimGetter func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)

// RecoveryReport says what Recover did.
type RecoveryReport struct {
	Kept, RolledBack, Stale, Rebuilt, OrphanSpecs, UnownedMig, UnownedMPS int
	// Problems lists what Recover could not make sense of or could not
	// undo. None of them stops the plugin: it serves every other claim.
	Problems []string
}

func (r *RecoveryReport) problem(logger klog.Logger, err error, msg string, kv ...any) {
	logger.Error(err, msg, kv...)
	r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", msg, err))
}

// Recover reconciles the node with the checkpoint before the kubelet is
// served:
//   - a claim recorded only as PrepareStarted died half-way: it is rolled back;
//   - a prepared claim whose ResourceClaim is gone, or was replaced by one
//     with another UID, will never be unprepared by the kubelet: it is
//     unprepared now;
//   - a CDI spec without a record (its checkpoint was lost or moved aside)
//     is re-adopted from the record the spec carries, then checked like
//     any other claim; a spec that carries none is removed;
//   - a kept claim's damaged or missing CDI spec is rewritten from its record.
//
// Recover never fails: the plugin must not crash-loop on its own state.
// What it cannot fix is logged and listed in the report's Problems.
func (s *State) Recover(ctx context.Context, getClaim ClaimGetter) RecoveryReport {
	logger := klog.FromContext(ctx)
	var report RecoveryReport

	if _, err := s.CDI.RemoveTempFiles(); err != nil {
		report.problem(logger, err, "Removing unfinished CDI spec writes")
	}
	specs, err := s.CDI.List()
	if err != nil {
		report.problem(logger, err, "Listing CDI specs")
	}
	for _, spec := range specs {
		if _, ok := s.Store.Get(spec.UID); ok {
			continue
		}
		rec, usable := spec.Claim()
		if !usable || rec.State != checkpoint.PrepareCompleted {
			logger.Info("Removing CDI spec without a usable record", "claimUID", spec.UID)
			if err := s.CDI.Remove(spec.UID); err != nil {
				report.problem(logger, err, "Removing CDI spec", "claimUID", spec.UID)
			}
			report.OrphanSpecs++
			continue
		}
		if err := s.Store.Put(rec); err != nil {
			report.problem(logger, err, "Rebuilding checkpoint record from CDI spec", "claimUID", rec.UID)
			continue
		}
		logger.Info("Rebuilt checkpoint record from CDI spec", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
		report.Rebuilt++
	}

	for _, rec := range s.Store.List() {
		if rec.State != checkpoint.PrepareCompleted {
			logger.Info("Rolling back interrupted prepare", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			if err := s.unprepare(ctx, rec); err != nil {
				report.problem(logger, err, "Rolling back interrupted prepare", "claimUID", rec.UID)
				s.hold(rec) // still configured: keep others off its devices
				continue
			}
			report.RolledBack++
			continue
		}
		stale, err := s.isStale(ctx, getClaim, rec)
		if err != nil {
			// The API cannot tell us; keeping the claim is the safe choice.
			logger.Error(err, "Cannot check claim, keeping it prepared", "claim", klog.KRef(rec.Namespace, rec.Name))
		}
		if stale {
			logger.Info("Unpreparing claim that no longer exists", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			if err := s.unprepare(ctx, rec); err != nil {
				report.problem(logger, err, "Unpreparing claim that no longer exists", "claimUID", rec.UID)
				s.hold(rec)
				continue
			}
			report.Stale++
			continue
		}
		s.adopt(logger, rec, &report)
		report.Kept++
	}
	report.UnownedMig = s.destroyUnownedMig(logger, &report)
	report.UnownedMPS = s.stopUnownedMPS(logger, &report)
	return report
}

// destroyUnownedMig removes MIG devices on dynamically partitioned GPUs
// that no prepared claim owns: what a crash between "created" and
// "checkpointed" leaves behind.
func (s *State) destroyUnownedMig(logger klog.Logger, report *RecoveryReport) int {
	owned := map[[2]string]bool{}
	for _, rec := range s.Store.List() {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.Dynamic && d.Mig.GIID >= 0 {
				owned[[2]string{d.Mig.ParentUUID, fmt.Sprint(d.Mig.GIID)}] = true
			}
		}
	}
	destroyed := 0
	seen := map[string]bool{}
	for _, dev := range s.Devices {
		// Every GPU offered for dynamic MIG, including those (Ampere) not
		// also published whole. A failure on one GPU leaves the others.
		gpu := dev.GPU
		if dev.Kind != DynamicMig || seen[gpu.UUID] {
			continue
		}
		seen[gpu.UUID] = true
		existing, err := nvdev.ExistingMigDevices(gpu.Device, gpu.MigProfiles)
		if err != nil {
			report.problem(logger, err, "Listing MIG devices", "gpu", gpu.UUID)
			continue
		}
		for _, m := range existing {
			if owned[[2]string{gpu.UUID, fmt.Sprint(m.GIID)}] {
				continue
			}
			if err := mig.Destroy(gpu.Device, m.GIID, m.CIID); err != nil {
				report.problem(logger, err, "Destroying a MIG device no claim owns", "gpu", gpu.UUID, "gpuInstance", m.GIID)
				continue
			}
			destroyed++
		}
		if err := mig.DisableIfEmpty(gpu.Device, gpu.MigProfiles); err != nil {
			report.problem(logger, err, "Turning MIG mode off on an empty GPU", "gpu", gpu.UUID)
		}
	}
	return destroyed
}

func (s *State) isStale(ctx context.Context, getClaim ClaimGetter, rec checkpoint.PreparedClaim) (bool, error) {
	claim, err := getClaim(ctx, rec.Namespace, rec.Name)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return claim.UID != rec.UID, nil
}

// adopt marks a kept claim's devices as held, makes sure its sharing is in
// place (an MPS daemon is restarted if it did not survive), and rewrites
// its CDI spec if the spec was lost or damaged. A device the node no
// longer has (a GPU that fell off the bus) is reported and skipped: the
// record stays, so that the kubelet's unprepare still cleans up.
func (s *State) adopt(logger klog.Logger, rec checkpoint.PreparedClaim, report *RecoveryReport) {
	s.hold(rec)
	// A plugin killed after answering the kubelet but before its background
	// status write would otherwise leave the claim without device status.
	if s.Status != nil {
		s.Status.Prepared(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Name, UID: rec.UID}}, rec.Devices)
	}
	var records []checkpoint.PreparedDevice
	var planned []plannedDevice
	for _, d := range rec.Devices {
		dev, ok := s.Devices[d.Device]
		if !ok {
			report.problem(logger, fmt.Errorf("device %s is no longer on this node", d.Device), "Prepared claim lost a device", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			continue
		}
		extra, err := s.applySharing(d.Sharing)
		if err != nil {
			report.problem(logger, err, "Restoring sharing of a prepared claim", "claimUID", rec.UID, "device", d.Device)
		}
		records = append(records, d)
		planned = append(planned, plannedDevice{device: dev, extra: extra})
	}
	if s.CDI.Intact(rec.UID) {
		return
	}
	logger.Info("Rewriting missing or damaged CDI spec from the checkpoint", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
	if _, err := s.CDI.Write(rec.UID, cdiDevices(records, planned), rec); err != nil {
		report.problem(logger, err, "Rewriting CDI spec", "claimUID", rec.UID)
	}
}

// stopUnownedMPS stops MPS daemons that no prepared claim uses, e.g. those
// of a claim whose record was damaged and moved aside.
func (s *State) stopUnownedMPS(logger klog.Logger, report *RecoveryReport) int {
	if s.Sharing == nil || s.Sharing.MPS == nil {
		return 0
	}
	owned := map[string]bool{}
	for _, rec := range s.Store.List() {
		for _, d := range rec.Devices {
			if d.Sharing != nil && configapi.SharingStrategy(d.Sharing.Strategy) == configapi.MpsStrategy {
				owned[d.Sharing.Target] = true
			}
		}
	}
	stopped := 0
	for _, d := range s.Sharing.MPS.Daemons() {
		if owned[d.DeviceUUID] {
			continue
		}
		if err := s.Sharing.MPS.Stop(d); err != nil {
			report.problem(logger, err, "Stopping MPS daemon no claim uses", "device", d.DeviceUUID)
			continue
		}
		stopped++
	}
	return stopped
}
