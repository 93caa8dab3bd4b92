// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// Snapshot is the health of every published device as the kubelet wants it.
func (m *Monitor) Snapshot() kubeletplugin.DeviceHealthReport {
	m.init()
	report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(m.Devices))}
	now := m.now()
	for _, d := range m.Devices {
		st, ok := m.state.status(d.DeviceName)
		h := kubeletplugin.DeviceHealth{PoolName: d.PoolName, DeviceName: d.DeviceName, Health: kubeletplugin.HealthStatusUnknown, LastUpdated: now}
		switch {
		case !ok:
		case st.Healthy:
			h.Health = kubeletplugin.HealthStatusHealthy
		default:
			h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, st.Message
		}
		report.Devices = append(report.Devices, h)
	}
	return report
}

// Watch implements kubeletplugin.DRAPlugin.WatchHealthStatus: an initial
// report, then one on every change and at least every Resend.
func (m *Monitor) Watch(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	changes, stop := m.Subscribe()
	defer stop()
	ticker := time.NewTicker(m.Resend)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case reports <- m.Snapshot():
		case <-changes:
			// Changed while the report waited for the reader: send the
			// newer one instead.
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-ticker.C:
		}
	}
}
