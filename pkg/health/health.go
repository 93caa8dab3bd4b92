// Package health watches NVML for devices that fail and reports them to the
// kubelet through the DRA health service, so pods on a lost GPU show it in
// their status.
package health

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// Device is one published device to watch.
type Device struct {
	PoolName   string
	DeviceName string
	NVML       nvml.Device
}

// Monitor polls NVML. Polling is used rather than only XID events because
// a GPU that falls off the bus produces no event on its own handle, while
// every query on it answers ERROR_GPU_IS_LOST.
type Monitor struct {
	Devices []Device
	// Interval between checks.
	Interval time.Duration
	// Resend re-sends an unchanged report before the kubelet's 30 s timeout
	// turns the health to Unknown.
	Resend time.Duration
	now    func() time.Time
}

// New returns a monitor with production intervals.
func New(devices []Device) *Monitor {
	return &Monitor{Devices: devices, Interval: 5 * time.Second, Resend: 10 * time.Second, now: time.Now}
}

// Check returns the health of one device and why.
func Check(dev nvml.Device) (kubeletplugin.HealthStatus, string) {
	_, ret := dev.GetMemoryInfo()
	switch ret {
	case nvml.SUCCESS:
		return kubeletplugin.HealthStatusHealthy, ""
	case nvml.ERROR_GPU_IS_LOST:
		return kubeletplugin.HealthStatusUnhealthy, "GPU is lost: it no longer answers on the PCIe bus; drain the node and reset or replace the GPU"
	default:
		return kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("NVML query failed: %s", nvml.ErrorString(ret))
	}
}

// Snapshot checks every device once.
func (m *Monitor) Snapshot() kubeletplugin.DeviceHealthReport {
	now := m.now()
	report := kubeletplugin.DeviceHealthReport{Devices: make([]kubeletplugin.DeviceHealth, 0, len(m.Devices))}
	for _, d := range m.Devices {
		status, msg := Check(d.NVML)
		report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
			PoolName:    d.PoolName,
			DeviceName:  d.DeviceName,
			Health:      status,
			LastUpdated: now,
			Message:     msg,
		})
	}
	return report
}

// Watch implements kubeletplugin.DRAPlugin.WatchHealthStatus: an initial
// report, then one on every change and at least every Resend.
func (m *Monitor) Watch(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	var last kubeletplugin.DeviceHealthReport
	var lastSent time.Time
	ticker := time.NewTicker(m.Interval)
	defer ticker.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
			}
		}
		cur := m.Snapshot()
		if first || changed(last, cur) || m.now().Sub(lastSent) >= m.Resend {
			select {
			case <-ctx.Done():
				return nil
			case reports <- cur:
			}
			last, lastSent = cur, m.now()
		}
	}
}

func changed(a, b kubeletplugin.DeviceHealthReport) bool {
	if len(a.Devices) != len(b.Devices) {
		return true
	}
	for i := range a.Devices {
		if a.Devices[i].Health != b.Devices[i].Health || a.Devices[i].Message != b.Devices[i].Message {
			return true
		}
	}
	return false
}
