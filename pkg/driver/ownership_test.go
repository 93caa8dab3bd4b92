// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"os"
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
