// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMonitorDevicesTurnedOffKeepAHeldMonitor (issue 28, defect 1): a
// helm upgrade turns kubeletPlugin.monitorDevices off while a monitoring
// pod's claim holds a monitor device. The restarted plugin keeps that
// monitor device published and the claim prepared (same CDI IDs, spec on
// disk); once the claim is released, the next start drops it.
func TestMonitorDevicesTurnedOffKeepAHeldMonitor(t *testing.T) {
	n := newMigNode(t, "h100x1")
	c := n.adminClaim("dcgm", []string{"gpu-0-monitor"})
	ids := n.mustPrepare(c)

	n.noMonitors = true
	names := restartedNames(t, n)
	if !slices.Contains(names, "gpu-0-monitor") {
		t.Fatalf("the held monitor device is no longer published: %v", names)
	}
	if _, err := os.Stat(n.specPath(c)); err != nil {
		t.Fatalf("the monitoring claim lost its CDI spec: %v", err)
	}
	if again := n.mustPrepare(c); !slices.Equal(again, ids) {
		t.Fatalf("prepare after the upgrade answered %v, before %v", again, ids)
	}
	n.unprepare(c)
	if names := restartedNames(t, n); slices.Contains(names, "gpu-0-monitor") {
		t.Fatalf("after release the monitor device is still published: %v", names)
	}
}

// TestLostRecordKeepsTheGPUDynamic (issue 28): a claim whose checkpoint
// record was lost (moved aside as damaged) is rebuilt from its CDI spec at
// start; the device table is built from that record too, so the GPU stays
// dynamically partitioned instead of offering the claim's MIG device again
// as an admin's static one.
func TestLostRecordKeepsTheGPUDynamic(t *testing.T) {
	n := newMigNode(t, "h100x1")
	c := n.claim("lost-record", []string{"gpu-0-mig-1g10gb-19-0"})
	ids := n.mustPrepare(c)
	n.stop()
	if err := os.Remove(filepath.Join(n.dir("state"), "checkpoint", "uid-lost-record.json")); err != nil {
		t.Fatal(err)
	}
	names := restartedNames(t, n)
	if !slices.Contains(names, "gpu-0-mig-1g10gb-19-0") || !slices.Contains(names, "gpu-0-mig-2g20gb-14-2") {
		t.Fatalf("the GPU is no longer published as dynamically partitioned: %v", names)
	}
	n.requireStillPrepared(c, ids, "gpu-0-mig-1g10gb-19-0")
}
