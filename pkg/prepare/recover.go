package prepare

import (
	"context"
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// ClaimGetter looks a claim up in the API.
type ClaimGetter func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)

// RecoveryReport says what Recover did.
type RecoveryReport struct {
	Kept, RolledBack, Stale, Rebuilt, OrphanSpecs, UnownedMig int
}

// Recover reconciles the node with the checkpoint before the kubelet is
// served:
//   - a claim recorded only as PrepareStarted died half-way: it is rolled back;
//   - a prepared claim whose ResourceClaim is gone, or was replaced by one
//     with another UID, will never be unprepared by the kubelet: it is
//     unprepared now;
//   - a CDI spec without a record (its checkpoint was lost or moved aside)
//     is re-adopted from the record the spec carries, then checked like
//     any other claim; a spec that carries none is removed.
func (s *State) Recover(ctx context.Context, getClaim ClaimGetter) (RecoveryReport, error) {
	logger := klog.FromContext(ctx)
	var report RecoveryReport

	specs, err := s.CDI.List()
	if err != nil {
		return report, fmt.Errorf("list CDI specs: %w", err)
	}
	for _, spec := range specs {
		if _, ok := s.Store.Get(spec.UID); ok {
			continue
		}
		var rec checkpoint.PreparedClaim
		if spec.Record == "" || json.Unmarshal([]byte(spec.Record), &rec) != nil || rec.UID != spec.UID || rec.State != checkpoint.PrepareCompleted {
			logger.Info("Removing CDI spec without a usable record", "claimUID", spec.UID)
			if err := s.CDI.Remove(spec.UID); err != nil {
				return report, err
			}
			report.OrphanSpecs++
			continue
		}
		if err := s.Store.Put(rec); err != nil {
			return report, err
		}
		logger.Info("Rebuilt checkpoint record from CDI spec", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
		report.Rebuilt++
	}

	for _, rec := range s.Store.List() {
		if rec.State != checkpoint.PrepareCompleted {
			logger.Info("Rolling back interrupted prepare", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID)
			if err := s.unprepareLocked(ctx, rec); err != nil {
				return report, err
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
			if err := s.unprepareLocked(ctx, rec); err != nil {
				return report, err
			}
			report.Stale++
			continue
		}
		if err := s.adopt(rec); err != nil {
			return report, err
		}
		report.Kept++
	}
	destroyed, err := s.destroyUnownedMig()
	if err != nil {
		return report, err
	}
	report.UnownedMig = destroyed
	return report, nil
}

// destroyUnownedMig removes MIG devices on dynamically partitioned GPUs
// that no prepared claim owns: what a crash between "created" and
// "checkpointed" leaves behind.
func (s *State) destroyUnownedMig() (int, error) {
	owned := map[[2]string]bool{}
	for _, rec := range s.Store.List() {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.Dynamic && d.Mig.GIID >= 0 {
				owned[[2]string{d.Mig.ParentUUID, fmt.Sprint(d.Mig.GIID)}] = true
			}
		}
	}
	destroyed := 0
	for _, dev := range s.Devices {
		if dev.Kind != WholeGPU || !dev.Partitionable {
			continue
		}
		existing, err := nvdev.ExistingMigDevices(dev.GPU.Device, dev.GPU.MigProfiles)
		if err != nil {
			return destroyed, fmt.Errorf("GPU %s: %w", dev.Name, err)
		}
		for _, m := range existing {
			if owned[[2]string{dev.GPU.UUID, fmt.Sprint(m.GIID)}] {
				continue
			}
			if err := mig.Destroy(dev.GPU.Device, m.GIID, m.CIID); err != nil {
				return destroyed, fmt.Errorf("GPU %s: %w", dev.Name, err)
			}
			destroyed++
		}
		if err := mig.DisableIfEmpty(dev.GPU.Device, dev.GPU.MigProfiles); err != nil {
			return destroyed, fmt.Errorf("GPU %s: %w", dev.Name, err)
		}
	}
	return destroyed, nil
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
// place (an MPS daemon is restarted if it did not survive), and restores
// its CDI spec if the spec was lost.
func (s *State) adopt(rec checkpoint.PreparedClaim) error {
	s.mu.Lock()
	for _, d := range rec.Devices {
		if !d.Shared {
			s.inUse[d.Device] = rec.UID
		}
	}
	s.mu.Unlock()
	var planned []plannedDevice
	for _, d := range rec.Devices {
		dev, ok := s.Devices[d.Device]
		if !ok {
			return fmt.Errorf("prepared claim %s uses device %s, which this node no longer has", rec.UID, d.Device)
		}
		extra, err := s.applySharing(d.Sharing)
		if err != nil {
			return fmt.Errorf("prepared claim %s, device %s: %w", rec.UID, d.Device, err)
		}
		planned = append(planned, plannedDevice{device: dev, record: d, extra: extra})
	}
	if s.CDI.Exists(rec.UID) {
		return nil
	}
	_, err := s.CDI.Write(rec.UID, cdiDevices(rec.Devices, planned), rec)
	return err
}
