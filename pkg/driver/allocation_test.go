// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// scrape gathers the node's metrics as the /metrics endpoint would.
func (n *node) scrape() []*dto.MetricFamily {
	n.t.Helper()
	fams, err := n.driver.cfg.Metrics.Registry.Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	return fams
}

// gpuValue is the value of a per-GPU series of GPU minor gpu, with one
// more label (state or mode) when extra is set; absent: -1.
func gpuValue(fams []*dto.MetricFamily, name, gpu string, extra ...string) float64 {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[metricname.LabelGPU] != gpu {
				continue
			}
			for i := 0; i+1 < len(extra); i += 2 {
				if labels[extra[i]] != extra[i+1] {
					continue next
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// want checks series of one GPU: name (with label pairs) -> value.
func wantSeries(t *testing.T, what string, fams []*dto.MetricFamily, gpu string, want map[string]float64) {
	t.Helper()
	for key, v := range want {
		var name string
		var extra []string
		if _, err := fmt.Sscanf(key, "%s", &name); err != nil {
			t.Fatal(err)
		}
		for _, l := range []string{metricname.LabelState, metricname.LabelMode} {
			var base, value string
			if n, _ := fmt.Sscanf(key, "%s "+l+"=%s", &base, &value); n == 2 {
				name, extra = base, []string{l, value}
			}
		}
		if got := gpuValue(fams, name, gpu, extra...); got != v {
			t.Errorf("%s: gpu %s %s = %v, want %v", what, gpu, key, got, v)
		}
	}
}

const gib = float64(1 << 30)

// TestAllocationMetricsFollowPrepareAndUnprepare: the per-GPU allocation
// series say what is prepared on each GPU, and go back to free on
// unprepare and after a restart (they are read from the records).
func TestAllocationMetricsFollowPrepareAndUnprepare(t *testing.T) {
	n := newMigNode(t, "h100x2")
	fams := n.scrape()
	total := gpuValue(fams, metricname.GPUMemoryBytes, "0")
	slices := gpuValue(fams, metricname.GPUMigSlices, "0")
	if total < 80*gib || slices != 8 {
		t.Fatalf("H100: memory %v bytes, %v MIG slices", total, slices)
	}
	for _, gpu := range []string{"0", "1"} {
		wantSeries(t, "idle", fams, gpu, map[string]float64{
			metricname.GPUState + " state=free": 1, metricname.GPUState + " state=whole": 0,
			metricname.GPUMigSlicesInUse: 0, metricname.GPUMemoryAllocatedBytes: 0,
			metricname.GPUPreparedClaims + " mode=whole": 0,
		})
	}

	h100 := n.driver.cfg.Backend.Inventory.GPUs[0]
	migMemory := float64(profileMemory(h100, "3g.40gb") + 2*profileMemory(h100, "1g.10gb"))
	if migMemory < 60*gib*0.95 || migMemory > 60*gib {
		t.Fatalf("MIG profile memory %v, want about 60Gi", migMemory)
	}
	mig := n.claim("mig", []string{"gpu-0-mig-3g40gb-9-4", "gpu-0-mig-1g10gb-19-0"})
	mig2 := n.claim("mig2", []string{"gpu-0-mig-1g10gb-19-1"})
	ts := n.claim("ts", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`)
	watch := n.adminClaim("watch", []string{"gpu-0-monitor"})
	for _, c := range []string{"mig", "mig2", "ts", "watch"} {
		n.mustPrepare(n.claimObj(c))
	}
	fams = n.scrape()
	wantSeries(t, "MIG devices", fams, "0", map[string]float64{
		metricname.GPUState + " state=mig": 1, metricname.GPUState + " state=free": 0,
		metricname.GPUPreparedClaims + " mode=mig":   2, // the monitor claim uses nothing
		metricname.GPUPreparedClaims + " mode=whole": 0,
		metricname.GPUMigSlicesInUse:                 6, // 4 + 1 + 1 memory slices
		metricname.GPUMemoryAllocatedBytes:           migMemory,
	})
	wantSeries(t, "time-sliced", fams, "1", map[string]float64{
		metricname.GPUState + " state=shared":               1,
		metricname.GPUPreparedClaims + " mode=time-slicing": 1,
		metricname.GPUMemoryAllocatedBytes:                  total,
		metricname.GPUMigSlicesInUse:                        0,
	})

	n.unprepare(mig2)
	n.restart("h100x2")
	fams = n.scrape()
	wantSeries(t, "after unprepare and restart", fams, "0", map[string]float64{
		metricname.GPUPreparedClaims + " mode=mig": 1, metricname.GPUMigSlicesInUse: 5,
	})
	n.unprepare(mig, ts, watch)
	fams = n.scrape()
	for _, gpu := range []string{"0", "1"} {
		wantSeries(t, "all unprepared", fams, gpu, map[string]float64{
			metricname.GPUState + " state=free": 1, metricname.GPUState + " state=mig": 0, metricname.GPUState + " state=shared": 0,
			metricname.GPUMigSlicesInUse: 0, metricname.GPUMemoryAllocatedBytes: 0,
		})
	}

	// A GPU used whole.
	n.mustPrepare(n.claim("whole", []string{"gpu-1"}))
	wantSeries(t, "whole", n.scrape(), "1", map[string]float64{
		metricname.GPUState + " state=whole": 1, metricname.GPUPreparedClaims + " mode=whole": 1,
		metricname.GPUMemoryAllocatedBytes: total,
	})
}

// TestAllocationMetricsOfMemoryShares: memory-fraction shares count as
// claims of mode fraction and hold their consumed memory.
func TestAllocationMetricsOfMemoryShares(t *testing.T) {
	n := newSharingNode(t, "h100x1")
	a := n.sharedClaim("frac-a", "gpu-0", "20Gi", "")
	b := n.sharedClaim("frac-b", "gpu-0", "30Gi", "40")
	n.mustPrepare(a)
	n.mustPrepare(b)
	wantSeries(t, "two shares", n.scrape(), "0", map[string]float64{
		metricname.GPUState + " state=fraction":         1,
		metricname.GPUPreparedClaims + " mode=fraction": 2,
		metricname.GPUPreparedClaims + " mode=mps":      0,
		metricname.GPUMemoryAllocatedBytes:              50 * gib,
	})
	n.unprepare(a)
	wantSeries(t, "one share", n.scrape(), "0", map[string]float64{
		metricname.GPUPreparedClaims + " mode=fraction": 1, metricname.GPUMemoryAllocatedBytes: 30 * gib,
	})
	n.unprepare(b)
}

// TestGPUAllocationFromRecords: what counts, read from records directly:
// MPS on a whole GPU is shared and holds all its memory; a half-done
// prepare, an admin-access device and a GPU no longer present count for
// nothing.
func TestGPUAllocationFromRecords(t *testing.T) {
	inv := &nvdev.Inventory{GPUs: []*nvdev.GPU{
		{Minor: 0, UUID: "GPU-0", ProductName: "H", MemoryBytes: 80 << 30},
		{Minor: 1, UUID: "GPU-1", ProductName: "H", MemoryBytes: 80 << 30},
	}}
	mps := &checkpoint.SharingRecord{Strategy: configapi.MpsStrategy, Target: "GPU-0"}
	records := []checkpoint.PreparedClaim{
		{UID: "a", State: checkpoint.PrepareCompleted, Devices: []checkpoint.PreparedDevice{{Device: "gpu-0", UUID: "GPU-0", Sharing: mps}}},
		{UID: "b", State: checkpoint.RestorePending, Devices: []checkpoint.PreparedDevice{{Device: "gpu-0", UUID: "GPU-0", Sharing: mps}}},
		{UID: "c", State: checkpoint.PrepareStarted, Devices: []checkpoint.PreparedDevice{{Device: "gpu-1", UUID: "GPU-1"}}},
		{UID: "d", State: checkpoint.PrepareCompleted, Devices: []checkpoint.PreparedDevice{
			{Device: "gpu-1", UUID: "GPU-1", AdminAccess: true}, {Device: "gpu-9", UUID: "GPU-9"}}},
	}
	got := gpuAllocation(inv, records)
	if len(got) != 2 {
		t.Fatalf("%d GPUs", len(got))
	}
	if g := got[0]; g.State != metricname.StateShared || g.Claims[metricname.ModeMPS] != 2 || g.MemoryAllocatedBytes != 80<<30 || g.MigSlices != 0 {
		t.Errorf("GPU 0 under MPS: %+v", g)
	}
	if g := got[1]; g.State != metricname.StateFree || len(g.Claims) != 0 || g.MemoryAllocatedBytes != 0 {
		t.Errorf("GPU 1 with a half-done prepare and an admin-access claim: %+v", g)
	}
}

// A GPU a VM's claim holds through vfio-pci is in state passthrough, with
// all its memory allocated.
func TestGPUAllocationPassthrough(t *testing.T) {
	inv := &nvdev.Inventory{GPUs: []*nvdev.GPU{{Minor: 0, UUID: "GPU-0", ProductName: "H", MemoryBytes: 80 << 30}}}
	records := []checkpoint.PreparedClaim{{UID: "vm", State: checkpoint.PrepareCompleted, Devices: []checkpoint.PreparedDevice{
		{Device: "gpu-0-vfio", UUID: "GPU-0", Vfio: &checkpoint.VfioRecord{}}}}}
	got := gpuAllocation(inv, records)
	if g := got[0]; g.State != metricname.StatePassthrough || g.Claims[metricname.ModePassthrough] != 1 || g.MemoryAllocatedBytes != 80<<30 {
		t.Errorf("GPU 0 passed through: %+v", g)
	}
}
