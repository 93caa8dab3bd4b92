// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// reboot does to the node what a reboot does: the simulated GPUs lose
// their MIG devices and compute policies and get a new boot ID, and the
// CDI directory (a tmpfs) is emptied. The checkpoint stays. Then the
// plugin starts again.
func (n *node) reboot() RecoveryReport {
	n.t.Helper()
	if err := n.sim.Reboot(); err != nil {
		n.t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(n.dir, "cdi"))
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(n.dir, "cdi", e.Name())); err != nil {
			n.t.Fatal(err)
		}
	}
	n.restart()
	return n.state.RecoverLocal(n.t.Context())
}

// TestRebootRestoresEveryClaim (issue 20, defect 1): after a reboot every
// prepared claim is restored at start, before the kubelet is served: the
// dynamic MIG devices exist again at their recorded placements (with new
// UUIDs), time slices are set again, and the CDI specs are rewritten with
// the new UUIDs. The kubelet's prepare gets the same IDs.
func TestRebootRestoresEveryClaim(t *testing.T) {
	n := newNode(t, "h100x2", true)
	whole := claim("uid-whole", dev("gpu-0"))
	whole.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, testDriver, nil, timeSlice("Long"))}
	small, big := n.mig(1, "1g.10gb", 0), n.mig(1, "3g.40gb", 4)
	migs := claim("uid-migs", result{request: "small", device: small}, result{request: "big", device: big})
	idsWhole, idsMigs := n.prepare(whole), n.prepare(migs)
	before, _ := n.store.Get("uid-migs")
	oldBoot := n.sim.BootID()

	report := n.reboot()
	if report.Restored != 2 || report.Unrestored != 0 || len(report.Problems) != 0 {
		t.Fatalf("report after reboot: %+v", report)
	}
	if n.sim.BootID() == oldBoot {
		t.Fatal("the simulated reboot kept the boot ID")
	}
	if got := n.sim.MigInstanceCount(n.uuid(1)); got != 2 {
		t.Errorf("GPU 1 has %d MIG devices after restore, want 2", got)
	}
	if got := n.sim.TimeSlice(n.uuid(0)); got != "Long" {
		t.Errorf("GPU 0 time slice %s after restore, want Long", got)
	}
	after, _ := n.store.Get("uid-migs")
	if after.BootID != n.sim.BootID() {
		t.Errorf("restored record has boot %q, want %q", after.BootID, n.sim.BootID())
	}
	spec, err := os.ReadFile(n.cdi.SpecPath("uid-migs"))
	if err != nil {
		t.Fatalf("no CDI spec after restore: %v", err)
	}
	for i, d := range after.Devices {
		if d.Mig.GIID < 0 || d.UUID == "" || d.UUID == before.Devices[i].UUID {
			t.Errorf("device %s after restore: UUID %q (before %q), GI %d", d.Device, d.UUID, before.Devices[i].UUID, d.Mig.GIID)
		}
		if d.Mig.Start != before.Devices[i].Mig.Start || d.Mig.Profile != before.Devices[i].Mig.Profile {
			t.Errorf("device %s restored at %s/%d, recorded %s/%d", d.Device, d.Mig.Profile, d.Mig.Start, before.Devices[i].Mig.Profile, before.Devices[i].Mig.Start)
		}
		if !strings.Contains(string(spec), d.UUID) || strings.Contains(string(spec), before.Devices[i].UUID) {
			t.Errorf("CDI spec does not name the new UUID %s of %s only", d.UUID, d.Device)
		}
		if _, err := os.Stat(n.sim.MigDevicePath(d.UUID)); err != nil {
			t.Errorf("MIG device file of %s: %v", d.Device, err)
		}
	}
	if _, err := n.state.RemoveStale(t.Context(), getter(map[string]any{whole.Name: whole, migs.Name: migs})); err != nil {
		t.Fatal(err)
	}
	if got := n.status.last["uid-migs"]; len(got) != 2 || got[0].UUID != after.Devices[0].UUID {
		t.Errorf("device status not updated with the new UUIDs: %+v", got)
	}
	if !sameIDs(n.prepare(whole), idsWhole) || !sameIDs(n.prepare(migs), idsMigs) {
		t.Error("prepare after the reboot answered other CDI IDs")
	}
	// A plugin restart in the same boot restores nothing again.
	n.restart()
	if r := n.state.RecoverLocal(t.Context()); r.Restored != 0 || r.Kept != 2 {
		t.Errorf("restart in the same boot: %+v", r)
	}
	n.unprepare(whole)
	n.unprepare(migs)
	n.assertGone("uid-migs")
	if got := n.sim.MigInstanceCount(n.uuid(1)); got != 0 {
		t.Errorf("%d MIG devices left after unprepare", got)
	}
}

func sameIDs(a, b []kubeletplugin.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i].CDIDeviceIDs, ",") != strings.Join(b[i].CDIDeviceIDs, ",") || a[i].DeviceName != b[i].DeviceName {
			return false
		}
	}
	return true
}

// TestUnrestorableClaimIsReportedAndRefused: an Ampere GPU whose admin
// turned MIG mode off across the reboot cannot get its MIG device back
// (the driver never resets a GPU). The claim is listed as unrestored,
// its prepare fails with the reason instead of answering stale IDs, no
// CDI spec names a device that does not exist, and unprepare cleans up.
func TestUnrestorableClaimIsReportedAndRefused(t *testing.T) {
	n := newNode(t, "a100-40gbx2:mig", true)
	c := claim("uid-a100", dev(n.mig(0, "1g.5gb", 0)))
	n.prepare(c)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	if err := n.sim.SetMigModeAsAdmin(n.uuid(0), 0); err != nil {
		t.Fatal(err)
	}
	n.restart()
	report := n.state.RecoverLocal(t.Context())
	if report.Unrestored != 1 || report.Restored != 0 {
		t.Fatalf("report: %+v", report)
	}
	un := n.state.Unrestored()
	if len(un) != 1 || un[0].UID != "uid-a100" || !strings.Contains(un[0].Error(), "MIG mode is off") {
		t.Fatalf("unrestored: %v", un)
	}
	_, err := n.tryPrepare(c)
	if err == nil || !strings.Contains(err.Error(), "cannot be restored") || !strings.Contains(err.Error(), "MIG mode") {
		t.Fatalf("prepare of the unrestored claim: %v", err)
	}
	if _, err := os.Stat(n.cdi.SpecPath("uid-a100")); err == nil {
		t.Error("a CDI spec names the MIG device that does not exist")
	}
	if mode := n.migMode(0); mode != 0 {
		t.Errorf("MIG mode %d: the driver changed the admin's setting", mode)
	}
	n.unprepare(c)
	n.assertGone("uid-a100")
	if len(n.state.Unrestored()) != 0 {
		t.Error("claim still listed as unrestored after unprepare")
	}
}

// TestRestoreRetriedAtPrepare: a claim whose placement was taken at start
// is restored by the kubelet's next prepare once the placement is free.
func TestRestoreRetriedAtPrepare(t *testing.T) {
	n := newNode(t, "h100x1", true)
	c := claim("uid-retry", dev(n.mig(0, "2g.20gb", 2)))
	n.prepare(c)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	// Another profile over the placement (one of the same profile at the
	// same place would be adopted: TestRestoreAdoptsItsHalfMadeMigDevice).
	intruder, err := createMig(n, n.mig(0, "1g.10gb", 2))
	if err != nil {
		t.Fatal(err)
	}
	n.restart()
	if r := n.state.RecoverLocal(t.Context()); r.Unrestored != 1 {
		t.Fatalf("report with the placement taken: %+v", r)
	}
	// Start-up destroyed the unowned intruder after the failed restore, so
	// the retry finds the placement free.
	_ = intruder
	devs := n.prepare(c)
	rec, _ := n.store.Get("uid-retry")
	if len(devs) != 1 || rec.Devices[0].Mig.GIID < 0 || len(n.state.Unrestored()) != 0 {
		t.Fatalf("retry did not restore: %+v %+v", devs, rec)
	}
}

// TestReallocatedClaimIsPreparedAfresh (defect 5): a record made for an
// earlier allocation of the same claim UID does not answer a prepare of
// the new allocation, and the stale check unprepares it.
func TestReallocatedClaimIsPreparedAfresh(t *testing.T) {
	n := newNode(t, "h100x2", false)
	first := claim("uid-again", dev("gpu-0"))
	n.prepare(first)
	again := claim("uid-again", dev("gpu-1"))
	devs := n.prepare(again)
	if len(devs) != 1 || devs[0].DeviceName != "gpu-1" {
		t.Fatalf("prepare of the new allocation answered %+v", devs)
	}
	other := claim("uid-other", dev("gpu-0"))
	n.prepare(other) // gpu-0 is free again

	// The stale check compares allocations too.
	report, err := n.state.RemoveStale(t.Context(), getter(map[string]any{again.Name: first, other.Name: other}))
	if err != nil || report.Stale != 1 {
		t.Fatalf("RemoveStale: %+v, %v", report, err)
	}
	n.assertGone("uid-again")
	if _, ok := n.store.Get("uid-other"); !ok {
		t.Error("the claim with an unchanged allocation was removed")
	}
}

// TestTimeSliceConflictRefused (defect 6): a claim that asks another time
// slice than the one a prepared claim set on the same GPU is refused with
// both intervals named; unprepare puts back the interval of the claims
// that remain.
func TestTimeSliceConflictRefused(t *testing.T) {
	n := newNode(t, "h100x1", false)
	withSlice := func(uid, iv string, admin bool) *resourceapi.ResourceClaim {
		c := claim(types.UID(uid), result{request: "gpu", device: "gpu-0", admin: admin})
		c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, testDriver, nil, timeSlice(iv))}
		return c
	}
	monitor := withSlice("uid-monitor", "Long", true)
	n.prepare(monitor)
	_, err := n.tryPrepare(withSlice("uid-work", "Short", false))
	if err == nil || !strings.Contains(err.Error(), "Short conflicts with interval Long") || !strings.Contains(err.Error(), "claim-uid-monitor") {
		t.Fatalf("conflicting interval: %v", err)
	}
	if got := n.sim.TimeSlice(n.uuid(0)); got != "Long" {
		t.Errorf("time slice %s after the refused claim, want Long", got)
	}
	same := withSlice("uid-same", "Long", false)
	n.prepare(same)
	n.unprepare(same)
	if got := n.sim.TimeSlice(n.uuid(0)); got != "Long" {
		t.Errorf("time slice %s after the other claim left, want Long", got)
	}
	n.unprepare(monitor)
	if got := n.sim.TimeSlice(n.uuid(0)); got != "Default" {
		t.Errorf("time slice %s after the last claim left, want Default", got)
	}
}

// TestUnprepareRestoresRemainingInterval: records that disagree (written
// before conflicts were refused) leave the GPU at the interval of the
// claim that remains.
func TestUnprepareRestoresRemainingInterval(t *testing.T) {
	n := newNode(t, "h100x1", false)
	for _, r := range []struct {
		uid string
		iv  configapi.TimeSliceInterval
	}{{"uid-long", "Long"}, {"uid-short", "Short"}} {
		rec := checkpoint.PreparedClaim{UID: types.UID(r.uid), Namespace: "ns", Name: "claim-" + r.uid, State: checkpoint.PrepareCompleted,
			Devices: []checkpoint.PreparedDevice{{Requests: []string{"gpu"}, Pool: testPool, Device: "gpu-0", Type: "gpu", UUID: n.uuid(0), Shared: true, AdminAccess: true,
				Sharing: &checkpoint.SharingRecord{Strategy: "TimeSlicing", Target: n.uuid(0), Interval: r.iv}}}}
		if err := n.store.Put(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.sim.SetTimeSlice(n.uuid(0), "Short"); err != nil {
		t.Fatal(err)
	}
	n.unprepare(claim("uid-short", dev("gpu-0")))
	if got := n.sim.TimeSlice(n.uuid(0)); got != "Long" {
		t.Errorf("time slice %s after unprepare, want the remaining claim's Long", got)
	}
}
