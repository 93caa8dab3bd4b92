// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// undo reverses what NVIDIA's prepare changed on the node for a claim, in
// the order of its own unprepare (device_state.go, unprepareDevices, at
// 95932046): GPUs handed to a VM are bound back to nvidia, its dynamic
// MIG devices destroyed (then MIG mode off where none is left), its MPS
// control daemons stopped (compute mode DEFAULT again), and the GPUs it
// set a time slice on reset to the default slice. A device or GPU that
// another claim (NVIDIA's, with its ConsumableShares, or this plugin's)
// still uses is left as it is, as NVIDIA's unprepare leaves it. Each step
// is idempotent: a failed release is retried whole. The caller holds t.mu.
func (t *referenceTakeover) undo(ctx context.Context, uid types.UID, c refdriver.Claim) error {
	for _, d := range c.Devices {
		if d.Vfio {
			if err := t.rebindVfio(d); err != nil {
				return err
			}
		}
	}
	others := t.othersLocked(uid)
	if rec, ok := t.book.Foreign(uid); ok {
		for _, d := range rec.Devices {
			if d.Mig == nil || !d.Mig.Dynamic {
				continue // static MIG: an admin's layout, as the reference driver leaves it
			}
			if owner, shared := others.migUser(d.Mig); shared {
				klog.FromContext(ctx).V(2).Info("Not destroying a MIG device of NVIDIA's claim another claim still uses", "claim", c.String(), "device", d.Device, "user", owner)
				continue
			}
			if err := t.destroyMig(d, others); err != nil {
				return fmt.Errorf("destroy MIG device %s: %w", d.UUID, err)
			}
		}
	}
	for _, g := range c.Groups {
		if g.MPSDaemon != "" {
			if err := t.stopMPS(ctx, g); err != nil {
				return err
			}
		}
		if !g.TimeSliceApplied {
			// Absent since NVIDIA's 9734b95f unless a slice was applied;
			// before it, only with its TimeSlicingSettings gate, whose
			// state this plugin cannot know.
			continue
		}
		for _, gpu := range g.GPUs {
			if owner, shared := others.gpuUser(gpu); shared {
				klog.FromContext(ctx).V(2).Info("Not resetting the time slice of a GPU another claim still uses", "claim", c.String(), "gpu", gpu, "user", owner)
				continue
			}
			if err := t.resetTimeSlice(gpu); err != nil {
				return err
			}
		}
	}
	return nil
}

// users are the records of every claim but the one being released, this
// plugin's and NVIDIA's alike.
type users []checkpoint.PreparedClaim

func (t *referenceTakeover) othersLocked(uid types.UID) users {
	var out users
	for _, rec := range t.book.View().Records() {
		if rec.UID != uid {
			out = append(out, rec)
		}
	}
	return out
}

// migUser is a claim that holds the same MIG device (NVIDIA's
// isMigDeviceInUseByOtherClaims compares the device and its UUID).
func (u users) migUser(m *checkpoint.MigRecord) (types.UID, bool) {
	for _, rec := range u {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.ParentUUID == m.ParentUUID && d.Mig.GIID == m.GIID && d.Mig.GIID >= 0 {
				return rec.UID, true
			}
		}
	}
	return "", false
}

// gpuUser is a claim that holds the GPU whole (NVIDIA's
// isGpuUUIDInUseByOtherClaims compares whole GPUs only).
func (u users) gpuUser(gpu string) (types.UID, bool) {
	for _, rec := range u {
		for _, d := range rec.Devices {
			if d.Mig == nil && d.Vfio == nil && d.UUID == gpu {
				return rec.UID, true
			}
		}
	}
	return "", false
}

// onGPU is a claim that holds anything of the GPU.
func (u users) onGPU(gpu string) (types.UID, bool) {
	for _, rec := range u {
		for _, d := range rec.Devices {
			if d.UUID == gpu || d.Mig != nil && d.Mig.ParentUUID == gpu {
				return rec.UID, true
			}
		}
	}
	return "", false
}

// destroyMig destroys a MIG device the reference driver made, if it still
// is the one it recorded, and turns MIG mode off once no GPU instance is
// left, as NVIDIA's deleteMigDevice does (nvlib.go, maybeDisableMigMode:
// not on a GPU whose MIG mode changes only with a reset, as
// mig.DisableIfEmpty does not either). MIG mode stays while any other
// claim holds part of the GPU: this plugin's prepares of MIG devices on it
// record their claim before they turn MIG mode on.
func (t *referenceTakeover) destroyMig(d checkpoint.PreparedDevice, others users) error {
	for _, g := range t.cfg.Backend.Inventory.GPUs {
		if g.UUID != d.Mig.ParentUUID || g.Device == nil {
			continue
		}
		if _, ok := liveMig(g, refdriver.MigDevice{GIID: d.Mig.GIID, UUID: d.UUID}); ok {
			if err := mig.Destroy(g.Device, d.Mig.GIID, d.Mig.CIID); err != nil {
				return err
			}
		}
		if _, used := others.onGPU(g.UUID); used {
			return nil
		}
		return mig.DisableIfEmpty(g.Device, g.MigProfiles)
	}
	return nil
}

// stopMPS stops the reference driver's MPS control daemon of a group as
// its MpsControlDaemon.Stop does (sharing.go): its Deployment deleted,
// the compute mode of the group's GPUs set back from EXCLUSIVE_PROCESS to
// DEFAULT, the tmpfs of its shm/ unmounted and its directory removed. The
// Deployment is deleted by name in NVIDIA's namespace
// (Config.ReferenceNamespace), the one call on Deployments the chart's
// Role there grants, which its admission policy confines to NVIDIA's
// daemon Deployments of this node (templates/takeover.yaml).
func (t *referenceTakeover) stopMPS(ctx context.Context, g refdriver.Group) error {
	name := refdriver.MPSDeployment(g.MPSDaemon)
	if t.cfg.Client != nil {
		ns := t.cfg.ReferenceNamespace
		if ns == "" {
			return fmt.Errorf("stop its MPS control daemon: it runs as the Deployment %s in the namespace of NVIDIA's release, which this plugin is not told: set the chart value takeover.nvidiaNamespace to that namespace (helm upgrade), which lets the plugin delete NVIDIA's MPS daemon Deployments of its node there and nothing else", name)
		}
		policy := metav1.DeletePropagationForeground
		err := t.cfg.Client.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the Deployment %s/%s of its MPS control daemon: %w (chart value takeover.nvidiaNamespace names NVIDIA's namespace)", ns, name, err)
		}
	}
	for _, gpu := range g.GPUs {
		if err := t.resetComputeMode(gpu); err != nil {
			return err
		}
	}
	dir := refdriver.MPSDir(t.cfg.PluginDir, g.MPSDaemon)
	left, err := removeMPSDir(dir)
	if err != nil {
		return err
	}
	if left != "" {
		klog.FromContext(ctx).Info("NVIDIA's MPS daemon is stopped, but its emptied tmpfs stays mounted on the node: this plugin runs without CAP_SYS_ADMIN, which unmounting needs; it is gone at the next reboot, or run umount on the node", "path", left, "daemon", g.MPSDaemon)
	}
	return nil
}

// computeModeSetter sets a GPU's compute mode. Real GPUs are set through
// NVML; a TimeSlicer that is one (tests) stands in for it.
type computeModeSetter interface {
	SetComputeMode(uuid string, mode nvml.ComputeMode) error
}

// resetComputeMode sets a GPU's compute mode to DEFAULT, what NVIDIA's
// plugin runs `nvidia-smi -i <uuid> -c DEFAULT` for (nvlib.go,
// setComputeMode); NVML's nvmlDeviceSetComputeMode is what that calls.
// Simulated GPUs have no compute mode. A GPU that does not support one is
// not an error, nor is one NVML no longer finds.
func (t *referenceTakeover) resetComputeMode(uuid string) error {
	if s, ok := t.cfg.Backend.TimeSlicer.(computeModeSetter); ok {
		return s.SetComputeMode(uuid, nvml.COMPUTEMODE_DEFAULT)
	}
	if t.cfg.Backend.Simulator != nil || t.cfg.Backend.NVML == nil {
		return nil
	}
	dev, ret := t.cfg.Backend.NVML.DeviceGetHandleByUUID(uuid)
	if ret == nvml.ERROR_NOT_FOUND {
		return nil
	}
	if ret != nvml.SUCCESS {
		return fmt.Errorf("set the compute mode of GPU %s back to DEFAULT: %s", uuid, nvml.ErrorString(ret))
	}
	if ret := dev.SetComputeMode(nvml.COMPUTEMODE_DEFAULT); ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		return fmt.Errorf("set the compute mode of GPU %s back to DEFAULT: %s", uuid, nvml.ErrorString(ret))
	}
	return nil
}

// resetTimeSlice sets a GPU NVIDIA applied a time slice to back to the
// default one, as its unprepare does through TimeSlicingManager.SetTimeSlice
// (compute mode DEFAULT first, then the slice).
func (t *referenceTakeover) resetTimeSlice(uuid string) error {
	if err := t.resetComputeMode(uuid); err != nil {
		return err
	}
	if t.cfg.Backend.TimeSlicer == nil {
		return nil
	}
	if err := t.cfg.Backend.TimeSlicer.SetTimeSlice(uuid, configapi.DefaultTimeSlice); err != nil {
		return fmt.Errorf("reset the time slice of GPU %s to the default: %w", uuid, err)
	}
	return nil
}

// rebindVfio binds a GPU NVIDIA handed to a VM back to nvidia, as its
// unprepare does (vfio-device.go, Unconfigure). Only the PCI address whose
// NVIDIA UUID the checkpoint records is written (refdriver.VfioUUID), so a
// damaged checkpoint cannot name another device; releases that recorded
// no address are matched by that UUID against the node's PCI devices.
// NVIDIA then turns persistence mode on again where nvidia-persistenced
// cannot (legacy mode); this plugin leaves persistence mode to the node.
// NVML sees the GPU again, but this plugin publishes it only from its next
// start: its inventory is read at start.
func (t *referenceTakeover) rebindVfio(d refdriver.Device) error {
	host := t.cfg.Backend.VFIO
	addr := d.PCIBusID
	if addr == "" {
		addrs, err := host.Addresses()
		if err != nil {
			return fmt.Errorf("find the PCI address of the GPU it handed to a VM (VFIO device %s): %w", d.Name, err)
		}
		for _, a := range addrs {
			if refdriver.VfioUUID(a) == d.GPU {
				addr = a
				break
			}
		}
		if addr == "" {
			return fmt.Errorf("no PCI device of this node is NVIDIA's VFIO device %s (UUID %s): bind its GPU back to nvidia by hand", d.Name, d.GPU)
		}
	}
	if !vfio.ValidAddress(addr) || refdriver.VfioUUID(addr) != d.GPU {
		return fmt.Errorf("NVIDIA's checkpoint names PCI address %q for VFIO device %s, whose UUID %s is not that address's: not rebinding it", addr, d.Name, d.GPU)
	}
	if err := host.Bind(addr, vfio.DriverNvidia); err != nil {
		return fmt.Errorf("bind the GPU it handed to a VM back to nvidia: %w", err)
	}
	klog.Background().Info("Bound a GPU NVIDIA's reference driver handed to a VM back to nvidia; it is published from the plugin's next start", "pciBusID", addr, "device", d.Name)
	return nil
}
