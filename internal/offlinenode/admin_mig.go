// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package offlinenode

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

type adminMigOptions struct {
	offlineNode
	pluginDir  string
	gpu        int
	create     []string
	destroyAll bool
}

// NewAdminMigCommand is `gpudra simulate-admin-mig`.
func NewAdminMigCommand() *cobra.Command {
	var o adminMigOptions
	cmd := &cobra.Command{
		Use:   "simulate-admin-mig --simulate <profile> --node-name <node> [--state-dir <dir>] --gpu <minor> (--create <profile>[,<profile>...] | --destroy-all)",
		Short: "Partition a simulated GPU offline as an admin does (static MIG), or remove the admin's partitions",
		Long: `Does to one simulated GPU what an admin (or nvidia-mig-manager) does with
"nvidia-smi -i <gpu> -mig 1" and "nvidia-smi mig -i <gpu> -cgi <profiles> -C":
MIG mode goes on (Hopper and newer without a reset, Ampere with one) and a
GPU instance of each --create profile is made where NVML places it, with a
compute instance spanning it. The plugin, started afterwards, finds MIG
devices that none of its claims owns on a GPU in MIG mode and publishes them
as they are (static MIG, with their uuid). --destroy-all removes every MIG
device of the GPU and turns MIG mode off again ("nvidia-smi mig -dci",
"-dgi", "-mig 0").

Run it only while the plugin is stopped: the running plugin keeps the
simulated GPUs in memory and would overwrite the change. It refuses while
the plugin's DRA socket (dra*.sock in --plugin-dir) answers, and on a GPU
that a prepared claim of the plugin's checkpoint holds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.complete()
			if o.pluginDir == "" {
				o.pluginDir = o.stateDir
			}
			return simulateAdminMig(cmd.OutOrStdout(), o)
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.pluginDir, "plugin-dir", "", "where the plugin's DRA socket lives (<kubelet-dir>/plugins/<driver-name>); default --state-dir")
	f.IntVar(&o.gpu, "gpu", -1, "the GPU's minor number (/dev/nvidia<minor>)")
	f.StringSliceVar(&o.create, "create", nil, "MIG profiles to create, one MIG device each (e.g. 3g.40gb,3g.40gb)")
	f.BoolVar(&o.destroyAll, "destroy-all", false, "destroy every MIG device of the GPU and turn its MIG mode off")
	_ = cmd.MarkFlagRequired("gpu")
	cmd.MarkFlagsMutuallyExclusive("create", "destroy-all")
	cmd.MarkFlagsOneRequired("create", "destroy-all")
	return cmd
}

func simulateAdminMig(w io.Writer, o adminMigOptions) error {
	if err := pluginStopped(o.pluginDir); err != nil {
		return err
	}
	sim, _, err := o.open()
	if err != nil {
		return err
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		return fmt.Errorf("discover simulated GPUs: %w", err)
	}
	var gpu *nvdev.GPU
	var minors []int
	for _, g := range inv.GPUs {
		minors = append(minors, g.Minor)
		if g.Minor == o.gpu {
			gpu = g
		}
	}
	if gpu == nil {
		return fmt.Errorf("--gpu %d: the node has no GPU of that minor; it has %v", o.gpu, minors)
	}
	if err := notHeld(o.stateDir, gpu.UUID); err != nil {
		return fmt.Errorf("--gpu %d: %w", o.gpu, err)
	}
	if o.destroyAll {
		n, err := destroyAllMig(sim, gpu)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "GPU %d (%s): %d MIG devices destroyed, MIG mode off\n", gpu.Minor, gpu.UUID, n)
		return nil
	}
	// Every name is checked before the GPU is touched.
	var wanted []nvdev.MigProfile
	for _, name := range o.create {
		p, ok := migProfileNamed(gpu, strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("--create %q: GPU %d (%s) has no such MIG profile; it has %s", name, gpu.Minor, gpu.ProductName, profileNames(gpu))
		}
		wanted = append(wanted, p)
	}
	if err := sim.SetMigModeAsAdmin(gpu.UUID, nvml.DEVICE_MIG_ENABLE); err != nil {
		return fmt.Errorf("GPU %d: %w", gpu.Minor, err)
	}
	for _, p := range wanted {
		uuid, placement, err := createMigAsAdmin(gpu.Device, p)
		if err != nil {
			return fmt.Errorf("GPU %d: %w (MIG devices made before stay; --destroy-all removes them)", gpu.Minor, err)
		}
		fmt.Fprintf(w, "GPU %d (%s): created %s at slice %d: %s\n", gpu.Minor, gpu.UUID, p.Name, placement.Start, uuid)
	}
	return nil
}

// createMigAsAdmin makes one MIG device as `nvidia-smi mig -cgi <profile>
// -C` does: NVML picks the GPU instance's placement (no placement given),
// and one compute instance spans the GPU instance.
func createMigAsAdmin(dev nvml.Device, p nvdev.MigProfile) (string, nvml.GpuInstancePlacement, error) {
	info := p.Info
	gi, ret := dev.CreateGpuInstance(&info)
	if ret != nvml.SUCCESS {
		return "", nvml.GpuInstancePlacement{}, fmt.Errorf("create %s GPU instance: %s", p.Name, nvml.ErrorString(ret))
	}
	giInfo, ret := gi.GetInfo()
	if ret != nvml.SUCCESS {
		return "", nvml.GpuInstancePlacement{}, fmt.Errorf("GPU instance info: %s", nvml.ErrorString(ret))
	}
	ciProfile, ret := gi.GetComputeInstanceProfileInfo(p.CIProfileID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		return "", giInfo.Placement, fmt.Errorf("compute instance profile of %s: %s", p.Name, nvml.ErrorString(ret))
	}
	ci, ret := gi.CreateComputeInstance(&ciProfile)
	if ret != nvml.SUCCESS {
		return "", giInfo.Placement, fmt.Errorf("create %s compute instance: %s", p.Name, nvml.ErrorString(ret))
	}
	ciInfo, ret := ci.GetInfo()
	if ret != nvml.SUCCESS {
		return "", giInfo.Placement, fmt.Errorf("compute instance info: %s", nvml.ErrorString(ret))
	}
	uuid, err := nvdev.MigUUID(dev, int(giInfo.Id), int(ciInfo.Id))
	return uuid, giInfo.Placement, err
}

// destroyAllMig removes every MIG device of a GPU and turns MIG mode off,
// and returns how many it removed.
func destroyAllMig(sim *simulate.Simulator, gpu *nvdev.GPU) (int, error) {
	existing, err := nvdev.ExistingMigDevices(gpu.Device, gpu.MigProfiles)
	if err != nil {
		return 0, fmt.Errorf("GPU %d: %w", gpu.Minor, err)
	}
	for i, m := range existing {
		if err := mig.Destroy(gpu.Device, m.GIID, m.CIID); err != nil {
			return i, fmt.Errorf("GPU %d: %s MIG device at slice %d: %w", gpu.Minor, m.Profile.Name, m.Placement.Start, err)
		}
	}
	if err := sim.SetMigModeAsAdmin(gpu.UUID, nvml.DEVICE_MIG_DISABLE); err != nil {
		return len(existing), fmt.Errorf("GPU %d: %w", gpu.Minor, err)
	}
	return len(existing), nil
}

// pluginStopped fails while a plugin answers on a DRA socket in dir
// (dra.sock, or dra-<pod UID>.sock with rolling updates): the socket file
// of a stopped plugin may stay behind, but nothing accepts on it.
func pluginStopped(dir string) error {
	socks, _ := filepath.Glob(filepath.Join(dir, "dra*.sock"))
	for _, s := range socks {
		conn, err := net.DialTimeout("unix", s, time.Second)
		if err == nil {
			conn.Close()
			return fmt.Errorf("the plugin is running (%s answers): stop it first, the running plugin would overwrite the simulated GPUs' MIG state", s)
		}
	}
	return nil
}

// notHeld fails when a prepared claim of the plugin's checkpoint holds the
// GPU or a MIG device on it: an admin drains a GPU before partitioning it.
func notHeld(stateDir, uuid string) error {
	records, err := checkpoint.ReadOnly(checkpoint.Dir(stateDir))
	if err != nil {
		return fmt.Errorf("read the plugin's checkpoint: %w", err)
	}
	for _, rec := range records {
		for _, d := range rec.Devices {
			if d.UUID == uuid || d.Mig != nil && d.Mig.ParentUUID == uuid {
				return fmt.Errorf("claim %s/%s holds %s on this GPU: delete its pods first", rec.Namespace, rec.Name, d.Device)
			}
		}
	}
	return nil
}

func migProfileNamed(g *nvdev.GPU, name string) (nvdev.MigProfile, bool) {
	for _, p := range g.MigProfiles {
		if p.Name == name {
			return p, true
		}
	}
	return nvdev.MigProfile{}, false
}

func profileNames(g *nvdev.GPU) string {
	if len(g.MigProfiles) == 0 {
		return "none (not MIG-capable)"
	}
	names := make([]string, len(g.MigProfiles))
	for i, p := range g.MigProfiles {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
