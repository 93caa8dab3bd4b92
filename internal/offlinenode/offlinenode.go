// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package offlinenode changes a simulated node's state on disk while its
// plugin is stopped: `gpudra simulate-reboot` stands in for the node's
// reboot in the e2e tests, `gpudra simulate-admin-mig` for an admin who
// partitions a GPU (static MIG).
package offlinenode

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// offlineNode names a simulated node's state on disk, as the plugin that
// runs it was started, for the commands that change it while the plugin
// is stopped (simulate-reboot, simulate-admin-mig).
type offlineNode struct {
	profile, nodeName, stateDir, driverName string
}

// addFlags registers --simulate, --node-name, --state-dir and
// --driver-name, the first two required.
func (n *offlineNode) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&n.profile, "simulate", "", "the simulated node's profile, as the plugin's --simulate (e.g. h100x8)")
	f.StringVar(&n.nodeName, "node-name", "", "the simulated node's name, as the plugin's --node-name")
	f.StringVar(&n.stateDir, "state-dir", "", "the plugin's --state-dir; default /var/lib/kubelet/plugins/<driver-name>")
	f.StringVar(&n.driverName, "driver-name", "gpu.nvidia.com", "the DRA driver name, as the plugin's --driver-name")
	_ = cmd.MarkFlagRequired("simulate")
	_ = cmd.MarkFlagRequired("node-name")
}

// complete fills in the plugin's default state directory.
func (n *offlineNode) complete() {
	if n.stateDir == "" {
		n.stateDir = filepath.Join("/var/lib/kubelet/plugins", n.driverName)
	}
}

// open is the node's simulator as the plugin left it. It refuses a
// directory of other GPUs or another node: New would take it for a new
// node and forget what it records.
func (n *offlineNode) open() (*simulate.Simulator, simulate.Profile, error) {
	profile, err := simulate.ParseProfile(n.profile)
	if err != nil {
		return nil, profile, err
	}
	dir := filepath.Join(n.stateDir, "simulated")
	if err := simulate.CheckNode(profile, n.nodeName, dir); err != nil {
		return nil, profile, err
	}
	sim, err := simulate.New(profile, n.nodeName, dir)
	return sim, profile, err
}
