// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package offlinenode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/cobra"
)

type rebootOptions struct {
	offlineNode
	cdiRoot string
}

// NewRebootCommand is `gpudra simulate-reboot`.
func NewRebootCommand() *cobra.Command {
	var o rebootOptions
	cmd := &cobra.Command{
		Use:   "simulate-reboot --simulate <profile> --node-name <node> [--state-dir <dir>] [--cdi-root <dir>]",
		Short: "Reboot a simulated node offline: its MIG devices go, pending MIG modes apply, the boot ID changes",
		Long: `Does to a simulated node's GPUs what a reboot does to real ones (see
simulate.Reboot): every MIG instance is destroyed, a pending MIG mode takes
effect, Hopper and newer GPUs come back with MIG mode off while Ampere GPUs
keep theirs, time slices and XID faults are reset, and the boot ID changes.
Run it while the plugin is stopped, on the plugin's --state-dir (the
simulator lives in <state-dir>/simulated). With --cdi-root, the driver's CDI
specs and staging directory there are removed too, as a reboot empties a
tmpfs /var/run/cdi. MPS daemons are not touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.complete()
			return simulateReboot(cmd.OutOrStdout(), o)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.cdiRoot, "cdi-root", "", "if set, remove the driver's CDI specs and staging directory from this directory")
	return cmd
}

func simulateReboot(w io.Writer, o rebootOptions) error {
	sim, profile, err := o.open()
	if err != nil {
		return err
	}
	dropped := 0
	for i := range profile.Count {
		dev, ret := sim.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("simulated GPU %d: %s", i, nvml.ErrorString(ret))
		}
		uuid, _ := dev.GetUUID()
		dropped += sim.MigInstanceCount(uuid)
	}
	oldID := sim.BootID()
	if err := sim.Reboot(); err != nil {
		return err
	}
	fmt.Fprintf(w, "old boot ID: %s\nnew boot ID: %s\nMIG instances dropped: %d\n", oldID, sim.BootID(), dropped)
	if o.cdiRoot == "" {
		return nil
	}
	n, err := removeCDISpecs(o.cdiRoot, o.driverName)
	fmt.Fprintf(w, "CDI specs removed from %s: %d\n", o.cdiRoot, n)
	return err
}

// removeCDISpecs removes the driver's claim specs ("k8s.<driver>-claim_<uid>.json",
// pkg/cdi) and its staging directory (".k8s.<driver>-staging"), and
// returns how many specs it removed.
func removeCDISpecs(root, driverName string) (int, error) {
	vendor := "k8s." + driverName
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), vendor+"-") {
			continue
		}
		if err := os.Remove(filepath.Join(root, e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, os.RemoveAll(filepath.Join(root, "."+vendor+"-staging"))
}
