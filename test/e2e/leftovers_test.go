// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLeftovers lists what the driver left on the node: CDI specs,
// checkpoint records (and files moved aside), MIG instances, MIG mode
// still on, simulated MIG device files, MPS daemons (directories and
// processes) and time slices other than Default.
func nodeLeftovers() []string {
	var left []string
	for _, s := range driverCDISpecs() {
		left = append(left, "CDI spec "+s)
	}
	// Unfinished writes: the driver stages specs in its own subdirectory;
	// spec.*.tmp is what the CDI library leaves (only this driver writes
	// CDI specs on the local cluster).
	staged, _ := filepath.Glob(filepath.Join(cdiDir, ".k8s."+driverName+"-staging", "*"))
	tmp, _ := filepath.Glob(filepath.Join(cdiDir, "spec.*.tmp"))
	for _, s := range append(staged, tmp...) {
		left = append(left, "unfinished CDI spec "+s)
	}
	for _, r := range checkpointFiles() {
		left = append(left, "checkpoint file "+r)
	}
	files, _ := filepath.Glob(filepath.Join(stateDir(), "simulated", "mig-state", "mig-state.*.json"))
	newest, newestN := "", -1
	for _, f := range files {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(f), "mig-state.%d.json", &n); err == nil && n > newestN {
			newest, newestN = f, n
		}
	}
	if newest != "" {
		var state map[string]struct {
			MigMode        int               `json:"migMode"`
			PendingMigMode *int              `json:"pendingMigMode"`
			Instances      []json.RawMessage `json:"instances"`
		}
		data, err := os.ReadFile(newest)
		if err == nil {
			err = json.Unmarshal(data, &state)
		}
		if err != nil {
			left = append(left, fmt.Sprintf("unreadable MIG state %s: %v", newest, err))
		}
		for uuid, g := range state {
			if len(g.Instances) != 0 {
				left = append(left, fmt.Sprintf("%d MIG instances on %s", len(g.Instances), uuid))
			}
			if g.MigMode != 0 || (g.PendingMigMode != nil && *g.PendingMigMode != 0) {
				left = append(left, "MIG mode on for "+uuid)
			}
		}
	}
	migDevs, _ := filepath.Glob(filepath.Join(stateDir(), "simulated", "dev", "mig", "*"))
	for _, f := range migDevs {
		left = append(left, "simulated MIG device file "+f)
	}
	mpsDirs, _ := filepath.Glob(filepath.Join(stateDir(), "mps", "*"))
	for _, d := range mpsDirs {
		left = append(left, "MPS directory "+d)
	}
	if pods, err := client.CoreV1().Pods(driverNS).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=mps-control-daemon"}); err == nil {
		for _, p := range pods.Items {
			left = append(left, "MPS daemon pod "+p.Name)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		env, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(env), "GPU_DRA_MPS_STANDIN_DIR="+filepath.Join(stateDir(), "mps")) {
			left = append(left, "MPS stand-in daemon process "+filepath.Base(filepath.Dir(p)))
		}
	}
	policies, _ := filepath.Glob(filepath.Join(stateDir(), "simulated", "compute-policy", "*"))
	for _, p := range policies {
		if v := timeSliceOf(filepath.Base(p)); v != "Default" {
			left = append(left, fmt.Sprintf("time slice %s on %s", v, filepath.Base(p)))
		}
	}
	return left
}

func driverCDISpecs() []string {
	m, _ := filepath.Glob(filepath.Join(cdiDir, "k8s."+driverName+"-*"))
	return m
}

// checkpointFiles lists claim records and files moved aside in the checkpoint
// directory (the fence's .lock and .owner are not records).
func checkpointFiles() []string {
	var out []string
	for _, pat := range []string{"*.json", "*.corrupt-*", ".tmp-*"} {
		m, _ := filepath.Glob(filepath.Join(stateDir(), "checkpoint", pat))
		out = append(out, m...)
	}
	return out
}

func timeSliceOf(uuid string) string {
	data, err := os.ReadFile(filepath.Join(stateDir(), "simulated", "compute-policy", uuid))
	if err != nil {
		return "Default"
	}
	return strings.TrimSpace(string(data))
}

// requireCleanNode fails a test that would start on a node that keeps
// something of the driver's: what it finds at its end would not be its own.
func requireCleanNode(t *testing.T) {
	t.Helper()
	if left := nodeLeftovers(); len(left) != 0 {
		t.Fatalf("the node is not clean before the test (an earlier test left claims prepared?):\n  %s", strings.Join(left, "\n  "))
	}
}

// waitNodeClean waits (recovery after a restart may still be finishing)
// until nothing of the driver's is left on the node but what ignore
// accepts, and fails listing what is left.
func waitNodeClean(t *testing.T, when string, ignore func(string) bool) {
	t.Helper()
	var left []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		left = left[:0]
		for _, l := range nodeLeftovers() {
			if ignore == nil || !ignore(l) {
				left = append(left, l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left behind %s:\n  %s", when, strings.Join(left, "\n  "))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
