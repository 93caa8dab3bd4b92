package health

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func TestLostGPUIsReportedAndRecovers(t *testing.T) {
	sim, inv, err := simulate.Discover("h100x2", "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	m := New([]Device{{PoolName: "n1", DeviceName: "gpu-0", NVML: inv.GPUs[0].Device}, {PoolName: "n1", DeviceName: "gpu-1", NVML: inv.GPUs[1].Device}})
	m.Interval = 5 * time.Millisecond
	reports := make(chan kubeletplugin.DeviceHealthReport, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Watch(ctx, reports) }()

	first := <-reports
	for _, d := range first.Devices {
		if d.Health != kubeletplugin.HealthStatusHealthy {
			t.Fatalf("initial report: %+v", d)
		}
	}
	if err := sim.SetLost(inv.GPUs[1].UUID, true); err != nil {
		t.Fatal(err)
	}
	r := <-reports
	if r.Devices[0].Health != kubeletplugin.HealthStatusHealthy || r.Devices[1].Health != kubeletplugin.HealthStatusUnhealthy {
		t.Fatalf("after injecting a lost GPU: %+v", r.Devices)
	}
	if r.Devices[1].Message == "" {
		t.Fatal("unhealthy device without a message")
	}
	_ = sim.SetLost(inv.GPUs[1].UUID, false)
	if r := <-reports; r.Devices[1].Health != kubeletplugin.HealthStatusHealthy {
		t.Fatalf("after clearing the fault: %+v", r.Devices[1])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch returned %v on cancel", err)
	}
}
