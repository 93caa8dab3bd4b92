// Package mig creates and destroys MIG devices through NVML: a GPU instance
// at an exact placement plus one compute instance spanning it. It is the
// only place that changes a GPU's MIG state.
package mig

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

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
// first when needed. On failure nothing is left behind.
func Create(dev nvml.Device, p Placement) (Instance, error) {
	if err := ensureMigMode(dev, nvml.DEVICE_MIG_ENABLE); err != nil {
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
// can again be used whole. It is only called on GPUs whose MIG mode changes
// without a reset.
func DisableIfEmpty(dev nvml.Device, profiles []nvdev.MigProfile) error {
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
	return ensureMigMode(dev, nvml.DEVICE_MIG_DISABLE)
}

func ensureMigMode(dev nvml.Device, mode int) error {
	current, _, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get MIG mode: %s", nvml.ErrorString(ret))
	}
	if current == mode {
		return nil
	}
	if ret, _ := dev.SetMigMode(mode); ret != nvml.SUCCESS {
		return fmt.Errorf("set MIG mode to %d: %s", mode, nvml.ErrorString(ret))
	}
	return nil
}
