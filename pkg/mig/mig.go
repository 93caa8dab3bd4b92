// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package mig creates and destroys MIG devices through NVML: a GPU instance
// at an exact placement plus one compute instance spanning it. It is the
// only place that changes a GPU's MIG state.
package mig

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// Placement is where on a GPU a MIG device of a profile sits.
type Placement struct {
	Profile nvdev.MigProfile
	Start   uint32
	Size    uint32
}

// Instance is a created MIG device.
type Instance struct {
	UUID string
	GIID int
	CIID int
}

// Create makes a MIG device at exactly the placement, turning MIG mode on
// first when needed and possible without a reset. On failure nothing is
// left behind.
func Create(dev nvml.Device, p Placement) (Instance, error) {
	if err := enableMigMode(dev); err != nil {
		return Instance{}, err
	}
	info := p.Profile.Info
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: p.Start, Size: p.Size})
	if ret != nvml.SUCCESS {
		return Instance{}, fmt.Errorf("create %s GPU instance at slice %d: %s", p.Profile.Name, p.Start, nvml.ErrorString(ret))
	}
	inst, err := createComputeInstance(dev, gi, p)
	if err != nil {
		_ = gi.Destroy()
		return Instance{}, err
	}
	return inst, nil
}

func createComputeInstance(dev nvml.Device, gi nvml.GpuInstance, p Placement) (Instance, error) {
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return Instance{}, fmt.Errorf("GPU instance info: %s", nvml.ErrorString(ret))
	}
	ciProfile, ret := gi.GetComputeInstanceProfileInfo(p.Profile.CIProfileID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return Instance{}, fmt.Errorf("compute instance profile of %s: %s", p.Profile.Name, nvml.ErrorString(ret))
	}
	ci, ret := gi.CreateComputeInstance(&ciProfile)
	if ret != nvml.SUCCESS {
		return Instance{}, fmt.Errorf("create compute instance for %s: %s", p.Profile.Name, nvml.ErrorString(ret))
	}
	ciInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		_ = ci.Destroy()
		return Instance{}, fmt.Errorf("compute instance info: %s", nvml.ErrorString(ret))
	}
	uuid, err := nvdev.MigUUID(dev, int(giInfo.Id), int(ciInfo.Id))
	if err != nil {
		_ = ci.Destroy()
		return Instance{}, err
	}
	return Instance{UUID: uuid, GIID: int(giInfo.Id), CIID: int(ciInfo.Id)}, nil
}

// Adopt takes over a MIG device that already sits at a placement: what a
// plugin killed while creating it left (a GPU instance, with or without
// its compute instance). A missing compute instance is created.
func Adopt(dev nvml.Device, p Placement, giID, ciID int) (Instance, error) {
	if ciID >= 0 {
		uuid, err := nvdev.MigUUID(dev, giID, ciID)
		if err != nil {
			return Instance{}, err
		}
		return Instance{UUID: uuid, GIID: giID, CIID: ciID}, nil
	}
	gi, ret := dev.GetGpuInstanceById(giID)
	if ret != nvml.SUCCESS {
		return Instance{}, fmt.Errorf("find GPU instance %d: %s", giID, nvml.ErrorString(ret))
	}
	return createComputeInstance(dev, gi, p)
}

// DestroyAt removes the MIG device with these IDs only while it still sits
// at the placement: GPU instance IDs are NVML's to hand out again (NVML
// does not promise that an ID stays with a placement across destroys or
// reboots), so a recorded ID alone may name another claim's device by
// now. One that is gone, or now elsewhere, is not an error.
func DestroyAt(dev nvml.Device, p Placement, giID, ciID int) error {
	gi, ret := dev.GetGpuInstanceById(giID)
	if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
		return nil
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("find GPU instance %d: %s", giID, nvml.ErrorString(ret))
	}
	info, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("GPU instance %d info: %s", giID, nvml.ErrorString(ret))
	}
	if info.Placement.Start != p.Start || info.ProfileId != p.Profile.Info.Id {
		klog.Background().V(2).Info("Not destroying a GPU instance that now sits elsewhere", "gpuInstance", giID, "start", info.Placement.Start, "wantStart", p.Start)
		return nil
	}
	return Destroy(dev, giID, ciID)
}

// Destroy removes a MIG device. Already-gone instances are not an error, so
// unprepare and start-up cleanup can repeat it safely.
func Destroy(dev nvml.Device, giID, ciID int) error {
	gi, ret := dev.GetGpuInstanceById(giID)
	if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
		return nil
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("find GPU instance %d: %s", giID, nvml.ErrorString(ret))
	}
	if ciID >= 0 {
		ci, ret := gi.GetComputeInstanceById(ciID)
		switch ret {
		case nvml.SUCCESS:
			if ret := ci.Destroy(); ret != nvml.SUCCESS {
				return fmt.Errorf("destroy compute instance %d: %s", ciID, nvml.ErrorString(ret))
			}
		case nvml.ERROR_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
		default:
			return fmt.Errorf("find compute instance %d: %s", ciID, nvml.ErrorString(ret))
		}
	}
	if ret := gi.Destroy(); ret != nvml.SUCCESS {
		return fmt.Errorf("destroy GPU instance %d: %s", giID, nvml.ErrorString(ret))
	}
	return nil
}

// DisableIfEmpty turns MIG mode off when no GPU instance is left, so the GPU
// can again be used whole. It never changes the MIG mode of a GPU that
// needs a reset for it (Ampere): there MIG mode is the admin's, and a
// disable would only sit pending until the next reset or reboot. A change
// that another client keeps pending (the driver reports the activation
// status IN_USE) is not an error: the GPU stays in MIG mode, and a
// whole-GPU claim checks again (RequireMigDisabled).
func DisableIfEmpty(dev nvml.Device, profiles []nvdev.MigProfile) error {
	err := disableIfEmpty(dev, profiles)
	var pending *PendingError
	if errors.As(err, &pending) {
		klog.InfoS("MIG mode stays on for now", "reason", err)
		return nil
	}
	return err
}

// RequireMigDisabled makes sure a GPU whose MIG devices are published next
// to the whole GPU can be used whole: MIG mode off, or turned off now.
func RequireMigDisabled(dev nvml.Device, profiles []nvdev.MigProfile) error {
	if err := disableIfEmpty(dev, profiles); err != nil {
		return fmt.Errorf("the GPU cannot be used whole while MIG mode is on: %w", err)
	}
	current, _, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get MIG mode: %s", nvml.ErrorString(ret))
	}
	if current != nvml.DEVICE_MIG_DISABLE {
		return errors.New("the GPU cannot be used whole while MIG mode is on")
	}
	return nil
}

func disableIfEmpty(dev nvml.Device, profiles []nvdev.MigProfile) error {
	current, pending, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get MIG mode: %s", nvml.ErrorString(ret))
	}
	if current == nvml.DEVICE_MIG_DISABLE && pending == nvml.DEVICE_MIG_DISABLE {
		return nil
	}
	if nvdev.MigModeChangeNeedsReset(dev) {
		return nil
	}
	if current == nvml.DEVICE_MIG_DISABLE {
		// An enable is pending: withdraw it. There are no instances.
		return setMigMode(dev, nvml.DEVICE_MIG_DISABLE)
	}
	for _, p := range profiles {
		info := p.Info
		gis, ret := dev.GetGpuInstances(&info)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("list %s GPU instances: %s", p.Name, nvml.ErrorString(ret))
		}
		if len(gis) > 0 {
			return nil
		}
	}
	return setMigMode(dev, nvml.DEVICE_MIG_DISABLE)
}

// enableMigMode turns MIG mode on where the GPU can change it without a
// reset. On a GPU that needs a reset only an admin can turn it on, and such
// GPUs are only offered for dynamic MIG when MIG mode is already on.
func enableMigMode(dev nvml.Device) error {
	current, pending, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get MIG mode: %s", nvml.ErrorString(ret))
	}
	if current == nvml.DEVICE_MIG_ENABLE {
		if pending != nvml.DEVICE_MIG_ENABLE && !nvdev.MigModeChangeNeedsReset(dev) {
			// An earlier disable is still pending; cancel it.
			return setMigMode(dev, nvml.DEVICE_MIG_ENABLE)
		}
		return nil
	}
	if nvdev.MigModeChangeNeedsReset(dev) {
		return errors.New("MIG mode is off, and on this GPU it only changes with a GPU reset: the plugin leaves MIG mode to the admin (nvidia-smi -i <gpu> -mig 1, then reset the GPU)")
	}
	return setMigMode(dev, nvml.DEVICE_MIG_ENABLE)
}

// PendingError says that NVML accepted a MIG mode change that has not taken
// effect: the GPU needs a reset, or another client holds it.
type PendingError struct {
	Mode       int
	Activation nvml.Return
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("MIG mode %s is pending, not active: %s", modeName(e.Mode), nvml.ErrorString(e.Activation))
}

// setMigMode changes MIG mode and checks both what nvmlDeviceSetMigMode
// returns and the activation status it reports: the call can succeed while
// the change stays pending ("activationStatus would return the appropriate
// error code upon unsuccessful activation", NVML API reference). go-nvml
// returns them as (activationStatus, return).
func setMigMode(dev nvml.Device, mode int) error {
	activation, ret := dev.SetMigMode(mode)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("set MIG mode %s: %s", modeName(mode), nvml.ErrorString(ret))
	}
	if activation != nvml.SUCCESS {
		return &PendingError{Mode: mode, Activation: activation}
	}
	current, _, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get MIG mode: %s", nvml.ErrorString(ret))
	}
	if current != mode {
		return &PendingError{Mode: mode, Activation: nvml.SUCCESS}
	}
	return nil
}

func modeName(mode int) string {
	if mode == nvml.DEVICE_MIG_ENABLE {
		return "enabled"
	}
	return "disabled"
}
