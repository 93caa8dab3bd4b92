// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/step"
)

// plannedDevice is one allocated device with the config that applies to it.
// Its checkpoint record is not kept here: plan returns the records apart,
// and from then on the claim's record is the one place they change.
type plannedDevice struct {
	device *AllocatableDevice
	config configapi.Config
	// extra are CDI edits prepare adds (MPS pipe and limits).
	extra extraEdits
}

type extraEdits cdispec.ContainerEdits

// plan checks a claim's allocation against this node and resolves configs;
// it returns the devices to prepare and their initial records, in the same
// order. It touches nothing, so a claim with a bad config fails before any
// work.
func (s *State) plan(claim *resourceapi.ResourceClaim) ([]plannedDevice, []checkpoint.PreparedDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, nil, step.Errorf(step.Claim, "claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	alloc := claim.Status.Allocation.Devices
	configs, err := decodeConfigs(s.DriverName, alloc.Config)
	if err != nil {
		return nil, nil, step.Wrap(step.Config, err)
	}
	var planned []plannedDevice
	var records []checkpoint.PreparedDevice
	for _, r := range alloc.Results {
		if r.Driver != s.DriverName {
			continue
		}
		if r.Pool != s.PoolName {
			return nil, nil, step.Errorf(step.Device, "device %s is in pool %q, this node serves pool %q", r.Device, r.Pool, s.PoolName)
		}
		dev, ok := s.Devices[r.Device]
		if !ok {
			return nil, nil, step.Errorf(step.Device, "device %s is not published by this node; it may have been removed since the claim was allocated", r.Device)
		}
		if err := dev.Behavior().Plan(dev, r); err != nil {
			return nil, nil, step.Wrap(step.Claim, err)
		}
		cfg, err := configFor(configs, r.Request, dev.Kind)
		if err != nil {
			return nil, nil, step.Wrap(step.Config, err)
		}
		rec := newRecord(r, dev)
		if rec.Sharing, err = s.resolveSharing(cfg, dev, r, len(planned)); err != nil {
			return nil, nil, step.Errorf(step.Config, "device %s: %w", r.Device, err)
		}
		planned = append(planned, plannedDevice{device: dev, config: cfg})
		records = append(records, rec)
	}
	if len(planned) == 0 {
		return nil, nil, step.Errorf(step.Claim, "claim %s/%s has no device allocated by driver %s", claim.Namespace, claim.Name, s.DriverName)
	}
	if err := checkConfigs(claim, configs, planned); err != nil {
		return nil, nil, step.Wrap(step.Config, err)
	}
	return planned, records, nil
}

// newRecord is the checkpoint entry of an allocated device before any work.
func newRecord(r resourceapi.DeviceRequestAllocationResult, dev *AllocatableDevice) checkpoint.PreparedDevice {
	rec := checkpoint.PreparedDevice{
		Requests:    []string{r.Request},
		Pool:        r.Pool,
		Device:      r.Device,
		Type:        dev.Kind.ConfigType(),
		UUID:        dev.GPU.UUID,
		ProductName: dev.GPU.ProductName,
		Shared:      (r.AdminAccess != nil && *r.AdminAccess) || r.ShareID != nil,
		AdminAccess: r.AdminAccess != nil && *r.AdminAccess,
	}
	if r.ShareID != nil {
		rec.ShareID = string(*r.ShareID)
	}
	dev.Behavior().Record(&rec, dev)
	return rec
}

func lockKeys(planned []plannedDevice) []string {
	out := make([]string, 0, len(planned))
	for _, p := range planned {
		out = append(out, p.device.LockKey())
	}
	return out
}

// cdiDevices describes the prepared devices for the CDI spec; records carry
// what prepare learned (the UUID of a created MIG device).
func cdiDevices(records []checkpoint.PreparedDevice, planned []plannedDevice) []cdi.Device {
	out := make([]cdi.Device, 0, len(planned))
	for i, p := range planned {
		d := cdi.Device{Name: p.device.Name, UUID: records[i].UUID, ProductName: p.device.GPU.ProductName, Minor: p.device.GPU.Minor, Extra: cdispec.ContainerEdits(p.extra)}
		p.device.Behavior().Describe(&d, records[i], p.device)
		out = append(out, d)
	}
	return out
}

// writeSpec writes the claim's CDI spec, carrying rec in its annotations so
// that a lost checkpoint can be rebuilt from it (RecoverLocal), and the
// hardware it names (HardwareAnnotation). The spec's
// device names match the CDI IDs rec records (cdi.Writer.DeviceID).
func (s *State) writeSpec(rec checkpoint.PreparedClaim, planned []plannedDevice) error {
	annotations, err := checkpoint.SpecAnnotations(rec)
	if err != nil {
		return err
	}
	devices := cdiDevices(rec.Devices, planned)
	// What hardware the spec names (identity.go): start rewrites a spec
	// whose devices are not where it says any more.
	annotations[HardwareAnnotation] = hardwareKey(devices)
	return s.CDI.Write(rec.UID, devices, annotations)
}

// specIntact reports whether a claim's CDI spec is usable as it is: on
// disk, this driver's, with devices, and carrying an undamaged record.
func (s *State) specIntact(uid types.UID) bool {
	annotations, ok := s.CDI.Annotations(uid)
	return ok && checkpoint.SpecCarriesRecord(annotations)
}

// writeAhead reports whether a claim's prepare must record it on disk
// (PrepareStarted) before it configures anything: when a device's kind has
// something for a release to undo (a dynamic MIG device, a VM's binding)
// or sharing is applied (a time slice, an MPS daemon). Otherwise a crash
// before the completed record leaves nothing to roll back, so the claim
// is only held in memory until then (ledger.BeginUnwritten).
func writeAhead(planned []plannedDevice, records []checkpoint.PreparedDevice) bool {
	for i, p := range planned {
		if records[i].Sharing != nil || !p.device.Behavior().NothingToUndo() {
			return true
		}
	}
	return false
}
