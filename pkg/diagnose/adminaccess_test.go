// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"path/filepath"
	gslices "slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
)

// adminFixture is the recorded state these tests start from.
var adminFixture = filepath.Join("testdata", clusterviewtest.AdminAccessCounters)

// Without admin access the same request is the ordinary case: GPU 0 is
// allocated, and waiting for it is the advice; #140729 is not named.
func TestAdminAccessOffIsOrdinary(t *testing.T) {
	f := clusterviewtest.Load(t, adminFixture)
	f.SetAdminRequest(t, "gpu.nvidia.com", false)
	r := DiagnosePod(&f.Snapshot, "monitoring", "dcgm")
	if r.Status != Blocked {
		t.Fatalf("status %s: %s", r.Status, r.Verdict)
	}
	for _, want := range []string{"1 allocated to gpu-demo/train-a-gpu (pod gpu-demo/train-a)", "1 blocked by partitionable counters", "Wait for a device to be released"} {
		if !strings.Contains(r.Verdict, want) {
			t.Errorf("verdict lacks %q:\n%s", want, r.Verdict)
		}
	}
	if strings.Contains(r.Verdict, "140729") || strings.Contains(r.Verdict, "admin access") {
		t.Errorf("verdict treats the request as admin access:\n%s", r.Verdict)
	}
	if rr := r.Claims[0].Requests[0]; rr.AdminAccess || rr.Allocated != 1 || rr.CounterBlocked != 1 {
		t.Errorf("request report %+v, want 1 allocated and 1 counter-blocked, no admin access", rr)
	}
}

// The admin-access verdict never advises waiting, and counts GPU 0 (held
// by another claim) as blocked by its own counters, not as allocated.
func TestAdminAccessCountersVerdict(t *testing.T) {
	f := clusterviewtest.Load(t, adminFixture)
	r := DiagnosePod(&f.Snapshot, "monitoring", "dcgm")
	if strings.Contains(r.Verdict, "Wait for") || strings.Contains(r.Verdict, "wait for") {
		t.Errorf("verdict advises waiting:\n%s", r.Verdict)
	}
	rr := r.Claims[0].Requests[0]
	if !rr.AdminAccess || rr.Allocated != 0 || rr.CounterBlocked != 2 || len(rr.Holders) != 0 {
		t.Errorf("request report %+v, want admin access, 0 allocated, 2 counter-blocked", rr)
	}
	if len(rr.CounterBlocks) != 2 || !rr.CounterBlocks[0].WholeGPU || rr.CounterBlocks[0].By[0] != "gpu-0" {
		t.Errorf("counter blocks %+v, want gpu-0 blocked by itself", rr.CounterBlocks)
	}
	if strings.Contains(r.Verdict, "does not exist in this cluster") {
		t.Errorf("verdict says the monitor class is missing:\n%s", r.Verdict)
	}
}

// A cluster whose chart predates the monitor class is told to install it.
func TestAdminAccessMonitorClassMissing(t *testing.T) {
	f := clusterviewtest.Load(t, adminFixture)
	f.Snapshot.DeviceClasses = f.Snapshot.DeviceClasses[:2]
	r := DiagnosePod(&f.Snapshot, "monitoring", "dcgm")
	want := "DeviceClass monitor.gpu.nvidia.com does not exist in this cluster"
	if !strings.Contains(r.Verdict, want) {
		t.Errorf("verdict lacks %q:\n%s", want, r.Verdict)
	}
}

// On a node without dynamic MIG the GPUs consume no counters: admin access
// gets a GPU another pod holds, so the claim fits.
func TestAdminAccessHeldDeviceFits(t *testing.T) {
	f := clusterviewtest.Load(t, adminFixture)
	f.Snapshot.Slices = nil
	f.Simulated[0].DynamicMIG = false
	f.BuildSlices(t)
	f.Snapshot.Claims = gslices.DeleteFunc(f.Snapshot.Claims, func(c resourceapi.ResourceClaim) bool { return c.Name == "small-slice" })
	r := DiagnoseClaim(&f.Snapshot, "monitoring", "all-gpus")
	if r.Status != OK || !strings.Contains(r.Verdict, "fits it on node vm") {
		t.Errorf("status %s, want ok: %s", r.Status, r.Verdict)
	}
	f.SetAdminRequest(t, "gpu.nvidia.com", false)
	if r := DiagnoseClaim(&f.Snapshot, "monitoring", "all-gpus"); r.Status != Blocked || !strings.Contains(r.Verdict, "1 allocated to gpu-demo/train-a-gpu") {
		t.Errorf("without admin access: status %s, want blocked: %s", r.Status, r.Verdict)
	}
}
