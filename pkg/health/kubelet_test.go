// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func nextReport(t *testing.T, reports <-chan kubeletplugin.DeviceHealthReport) kubeletplugin.DeviceHealthReport {
	t.Helper()
	select {
	case r := <-reports:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no health report within 5s")
		return kubeletplugin.DeviceHealthReport{}
	}
}

func healthOf(r kubeletplugin.DeviceHealthReport) map[string]kubeletplugin.HealthStatus {
	out := map[string]kubeletplugin.HealthStatus{}
	for _, d := range r.Devices {
		out[d.DeviceName] = d.Health
	}
	return out
}

// watch runs Watch until the test ends and returns its reports.
func watch(t *testing.T, m *Monitor) <-chan kubeletplugin.DeviceHealthReport {
	t.Helper()
	reports := make(chan kubeletplugin.DeviceHealthReport)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Watch(ctx, reports) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch returned %v on cancel", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after its context ended")
		}
	})
	return reports
}

func TestSnapshotReportsEveryDeviceWithItsPool(t *testing.T) {
	u := newUnit(nil)
	for i := range u.m.Devices {
		u.m.Devices[i].PoolName = "node-a"
	}
	u.event(nvml.EventTypeXidCriticalError, 94, 2, 0)
	r := u.m.Snapshot()
	if len(r.Devices) != 4 {
		t.Fatalf("report of %d devices, want 4", len(r.Devices))
	}
	for _, d := range r.Devices {
		if d.PoolName != "node-a" || !d.LastUpdated.Equal(t0) {
			t.Errorf("%s: pool %q updated %v, want node-a at the clock's now", d.DeviceName, d.PoolName, d.LastUpdated)
		}
		wantUnhealthy := d.DeviceName == "gpu" || d.DeviceName == "mig-b"
		switch {
		case wantUnhealthy && (d.Health != kubeletplugin.HealthStatusUnhealthy || d.Message == ""):
			t.Errorf("%s: %s %q, want unhealthy with a message", d.DeviceName, d.Health, d.Message)
		case !wantUnhealthy && (d.Health != kubeletplugin.HealthStatusHealthy || d.Message != ""):
			t.Errorf("%s: %s %q, want healthy without a message", d.DeviceName, d.Health, d.Message)
		}
	}
}

// A device the monitor never computed a status for is Unknown, not
// Healthy: the kubelet must not trust a device nobody watches.
func TestSnapshotOfAnUnwatchedDeviceIsUnknown(t *testing.T) {
	u := newUnit(nil)
	u.m.init()
	u.m.Devices = append(u.m.Devices, Device{DeviceName: "late", UUID: "L"})
	r := u.m.Snapshot()
	if got := healthOf(r)["late"]; got != kubeletplugin.HealthStatusUnknown {
		t.Errorf("health of a device added after the start: %s, want Unknown", got)
	}
}

func TestWatchResendsAnUnchangedReport(t *testing.T) {
	u := newUnit(nil)
	u.m.Resend = 10 * time.Millisecond
	reports := watch(t, u.m)
	for i := range 3 {
		r := nextReport(t, reports)
		if h := healthOf(r); h["gpu"] != kubeletplugin.HealthStatusHealthy {
			t.Fatalf("report %d: %v", i, h)
		}
	}
}

func TestWatchSendsTheNewestStateNotAStaleOne(t *testing.T) {
	u := newUnit(nil)
	u.m.Resend = time.Hour // only changes send reports
	reports := watch(t, u.m)
	if h := healthOf(nextReport(t, reports)); h["mig-a"] != kubeletplugin.HealthStatusHealthy {
		t.Fatalf("initial report: %v", h)
	}
	// A change while nobody reads: Watch holds a report with mig-a
	// unhealthy. Another change before the kubelet reads: the report it
	// reads must hold both, not the stale one.
	u.event(nvml.EventTypeXidCriticalError, 94, 1, 0)
	// Give Watch time to block with the stale report; were it slower, the
	// test would pass without proving anything, never fail wrongly.
	time.Sleep(100 * time.Millisecond)
	u.event(nvml.EventTypeXidCriticalError, 94, 2, 0)
	h := healthOf(nextReport(t, reports))
	if h["mig-a"] != kubeletplugin.HealthStatusUnhealthy || h["mig-b"] != kubeletplugin.HealthStatusUnhealthy {
		t.Errorf("report after two faults: %v, want mig-a and mig-b unhealthy", h)
	}
}

func TestWatchEndsWhileTheKubeletDoesNotRead(t *testing.T) {
	u := newUnit(nil)
	reports := make(chan kubeletplugin.DeviceHealthReport) // never read
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.m.Watch(ctx, reports) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch blocked on a report nobody reads after its context ended")
	}
}
