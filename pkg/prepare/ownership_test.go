// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// Issue 28: a prepared claim owns its hardware until it is unprepared.
// Each test here failed on 3eefc22.

// TestRestartWithALostDeviceKeepsTheClaim (defect 1): a plain restart (no
// reboot) where one device of a claim is no longer offered changes no
// hardware: the claim's MIG device on the other GPU and its CDI spec stay,
// and nothing says the node rebooted.
func TestRestartWithALostDeviceKeepsTheClaim(t *testing.T) {
	n := newNode(t, "h100x2", true)
	small := n.mig(0, "1g.10gb", 0)
	c := claim("uid-two", result{request: "small", device: small}, result{request: "whole", device: "gpu-1"})
	n.prepare(c)
	before, _ := n.store.Get("uid-two")

	delete(n.devices, "gpu-1") // GPU 1 fell off the bus; the plugin restarts
	n.restart()
	report := n.state.RecoverLocal(t.Context())
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 1 {
		t.Errorf("GPU 0 has %d MIG devices after the restart, want the claim's 1", got)
	}
	if !n.state.specIntact("uid-two") {
		t.Error("the claim's CDI spec was removed while its pod runs")
	}
	after, _ := n.store.Get("uid-two")
	if after.Devices[0].UUID != before.Devices[0].UUID || after.State != checkpoint.PrepareCompleted {
		t.Errorf("record changed: %+v", after)
	}
	for _, p := range report.Problems {
		if strings.Contains(p, "rebooted") {
			t.Errorf("report says the node rebooted: %s", p)
		}
	}
	for _, e := range n.state.Unrestored() {
		if strings.Contains(e.Error(), "rebooted") {
			t.Errorf("unrestored says the node rebooted: %v", e)
		}
	}
	// Another claim cannot take the MIG device's placement.
	if _, err := n.tryPrepare(claim("uid-intruder", dev(n.mig(0, "7g.80gb", 0)))); err == nil {
		t.Error("a claim was prepared over the kept claim's MIG device")
	}
	n.unprepare(c)
	n.assertGone("uid-two")
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
		t.Errorf("%d MIG devices left after unprepare", got)
	}
}

// writeNewerRecord writes a record as a newer driver (format v4) would:
// the current fields plus one this driver does not know.
func writeNewerRecord(t *testing.T, n *node, rec checkpoint.PreparedClaim) {
	t.Helper()
	payload, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	payload = append(payload[:len(payload)-1], []byte(`,"leaseEpoch":7}`)...)
	data, err := json.Marshal(map[string]any{"version": "gpu.nvidia.com/checkpoint/v4", "checksum": crc32.ChecksumIEEE(payload), "claim": json.RawMessage(payload)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "checkpoint", string(rec.UID)+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestNewerRecordsOwnTheirHardware (defect 2): after a downgrade, a claim
// a newer driver prepared keeps its MIG device, its placement, its GPU's
// dynamic MIG, its CDI spec and its MPS daemon.
func TestNewerRecordsOwnTheirHardware(t *testing.T) {
	n := newNode(t, "h100x2", true)
	mpsRoot := t.TempDir()
	runner := &countingRunner{}
	n.state.Sharing.MPS = &sharing.MPS{Root: mpsRoot, Runner: runner}

	// The newer driver's claim: a 3g.40gb MIG device on GPU 0 with its
	// MPS daemon, and a CDI spec whose annotations this driver cannot read.
	name := n.mig(0, "3g.40gb", 4)
	inst, err := createMig(n, name)
	if err != nil {
		t.Fatal(err)
	}
	d := n.devices[name]
	rec := checkpoint.PreparedClaim{UID: "uid-newer", Namespace: "ns", Name: "claim-uid-newer", State: checkpoint.PrepareCompleted, BootID: n.sim.BootID(),
		Devices: []checkpoint.PreparedDevice{{Requests: []string{"gpu"}, Pool: testPool, Device: name, Type: "mig", UUID: inst.UUID,
			Mig:     &checkpoint.MigRecord{ParentUUID: n.uuid(0), Profile: "3g.40gb", Start: 4, Size: 4, Dynamic: true, GIID: inst.GIID, CIID: inst.CIID},
			Sharing: &checkpoint.SharingRecord{Strategy: configapi.MpsStrategy, Target: inst.UUID}}}}
	_ = d
	writeNewerRecord(t, n, rec)
	if err := os.MkdirAll(filepath.Join(mpsRoot, inst.UUID), 0o750); err != nil {
		t.Fatal(err)
	}
	spec := n.cdi.SpecPath("uid-newer")
	if err := os.WriteFile(spec, []byte(`{"cdiVersion":"0.6.0","kind":"gpu.nvidia.com/claim","annotations":{"future":"x"},"devices":[{"name":"x","containerEdits":{"env":["A=1"]}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// And a claim of this driver beside it.
	mine := claim("uid-mine", dev(n.mig(1, "1g.10gb", 0)))
	n.prepare(mine)

	n.restart()
	n.state.Sharing.MPS = &sharing.MPS{Root: mpsRoot, Runner: runner}
	report := n.state.RecoverLocal(t.Context())
	if report.UnownedMig != 0 || n.sim.MigInstanceCount(n.uuid(0)) != 1 {
		t.Errorf("the newer claim's MIG device was destroyed (report %+v)", report)
	}
	if _, err := os.Stat(spec); err != nil {
		t.Errorf("the newer claim's CDI spec was removed: %v", err)
	}
	if _, err := n.state.RemoveStale(t.Context(), getter(map[string]any{mine.Name: mine})); err != nil {
		t.Fatal(err)
	}
	if runner.stopped != 0 {
		t.Errorf("the newer claim's MPS daemon was stopped as unowned")
	}
	// Its placement, and the GPU whole, are not free for another claim.
	for _, other := range []string{n.mig(0, "1g.10gb", 4), "gpu-0"} {
		if _, err := n.tryPrepare(claim("uid-other", dev(other))); err == nil || !strings.Contains(err.Error(), "uid-newer") {
			t.Errorf("prepare of %s over the newer claim's MIG device: %v", other, err)
		}
	}
}

// countingRunner is an MPS runner whose daemons always run.
type countingRunner struct{ stopped int }

func (r *countingRunner) Start(context.Context, *sharing.Daemon) error { return nil }
func (r *countingRunner) Running(context.Context, *sharing.Daemon) (bool, error) {
	return true, nil
}
func (r *countingRunner) Stop(context.Context, *sharing.Daemon) error { r.stopped++; return nil }
func (r *countingRunner) List(context.Context) ([]string, error)      { return nil, nil }

// TestAdminAccessBesideMigRestores (defect 3): an admin-access claim on a
// whole GPU and a MIG claim on the same GPU (a pair the scheduler allows)
// are both restored after every reboot, whichever comes first.
func TestAdminAccessBesideMigRestores(t *testing.T) {
	n := newNode(t, "h100x1", true)
	admin := claim("uid-admin", result{request: "gpu", device: "gpu-0", admin: true})
	work := claim("uid-work", dev(n.mig(0, "1g.10gb", 0)))
	n.prepare(admin)
	n.prepare(work)
	for round := range 12 {
		report := n.reboot()
		if report.Restored != 2 || report.Unrestored != 0 {
			t.Fatalf("round %d: %+v", round, report)
		}
	}
	// The admin claim's retry at prepare does not fail either.
	n.prepare(admin)
}

// hangingRunner is an MPS runner whose API server never answers.
type hangingRunner struct{}

func (hangingRunner) Start(ctx context.Context, _ *sharing.Daemon) error {
	<-ctx.Done()
	return ctx.Err()
}
func (hangingRunner) Running(ctx context.Context, _ *sharing.Daemon) (bool, error) {
	<-ctx.Done()
	return false, ctx.Err()
}
func (hangingRunner) Stop(ctx context.Context, _ *sharing.Daemon) error {
	<-ctx.Done()
	return ctx.Err()
}
func (hangingRunner) List(ctx context.Context) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStartRollsBackMPSWithoutTheAPIServer (defect 4): rolling back an
// interrupted MPS prepare at start does not wait for the API server that
// runs the daemon pods; the daemon is stopped later, as unowned.
func TestStartRollsBackMPSWithoutTheAPIServer(t *testing.T) {
	n := newNode(t, "h100x1", false)
	mpsRoot := t.TempDir()
	uuid := n.uuid(0)
	if err := os.MkdirAll(filepath.Join(mpsRoot, uuid), 0o750); err != nil {
		t.Fatal(err)
	}
	half := checkpoint.PreparedClaim{UID: "uid-half", Namespace: "ns", Name: "claim-uid-half", State: checkpoint.PrepareStarted, BootID: n.sim.BootID(),
		Devices: []checkpoint.PreparedDevice{{Requests: []string{"gpu"}, Pool: testPool, Device: "gpu-0", Type: "gpu", UUID: uuid,
			Sharing: &checkpoint.SharingRecord{Strategy: configapi.MpsStrategy, Target: uuid}}}}
	if err := n.store.Put(half); err != nil {
		t.Fatal(err)
	}
	n.restart()
	n.state.Sharing.MPS = &sharing.MPS{Root: mpsRoot, Runner: hangingRunner{}}
	done := make(chan RecoveryReport, 1)
	start := time.Now()
	go func() { done <- n.state.RecoverLocal(context.Background()) }()
	select {
	case r := <-done:
		if r.RolledBack != 1 {
			t.Errorf("report: %+v", r)
		}
		t.Logf("start with an interrupted MPS prepare and a hanging API server: %s", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("start waits for the API server to roll back an MPS prepare")
	}
	n.assertGone("uid-half")
	// In the background, with the API server back, the daemon is stopped.
	runner := &countingRunner{}
	n.state.Sharing.MPS.Runner = runner
	if _, err := n.state.RemoveStale(t.Context(), getter(map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if runner.stopped != 1 {
		t.Errorf("the rolled-back claim's daemon was stopped %d times, want 1", runner.stopped)
	}
}

// TestUnrestoredClaimKeepsItsHardware (defect 5): a claim that could not
// be restored still owns its devices: no other claim is prepared on them.
func TestUnrestoredClaimKeepsItsHardware(t *testing.T) {
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
	if r := n.state.RecoverLocal(t.Context()); r.Unrestored != 1 {
		t.Fatalf("report: %+v", r)
	}
	_, err := n.tryPrepare(claim("uid-whole", dev("gpu-0")))
	if err == nil || !strings.Contains(err.Error(), "uid-a100") {
		t.Fatalf("whole GPU prepared under the unrestored claim's MIG device: %v", err)
	}
	n.unprepare(c)
	n.prepare(claim("uid-whole", dev("gpu-0")))
}

// TestRestoreAdoptsItsHalfMadeMigDevice (defect 6): a plugin killed while
// restoring (the MIG device made, the record not yet written) and started
// again in the same boot adopts the device at the recorded placement.
func TestRestoreAdoptsItsHalfMadeMigDevice(t *testing.T) {
	for _, computeInstance := range []bool{true, false} {
		t.Run(fmt.Sprintf("computeInstance=%v", computeInstance), func(t *testing.T) {
			n := newNode(t, "h100x1", true)
			name := n.mig(0, "2g.20gb", 2)
			c := claim("uid-killed", dev(name))
			n.prepare(c)
			if err := n.sim.Reboot(); err != nil {
				t.Fatal(err)
			}
			// What the killed restore left: the record forgot its
			// instances and says RestorePending; the device exists.
			rec, _ := n.store.Get("uid-killed")
			forgetInstances(&rec)
			rec.State = checkpoint.RestorePending
			if err := n.store.Put(rec); err != nil {
				t.Fatal(err)
			}
			d := n.devices[name]
			if computeInstance {
				if _, err := createMig(n, name); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := n.sim.SetMigModeAsAdmin(n.uuid(0), nvml.DEVICE_MIG_ENABLE); err != nil {
					t.Fatal(err)
				}
				info := d.Placement.Profile.Info
				if _, ret := d.GPU.Device.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 2, Size: 2}); ret != nvml.SUCCESS {
					t.Fatal(ret)
				}
			}
			n.restart()
			report := n.state.RecoverLocal(t.Context())
			if report.Restored != 1 || report.Unrestored != 0 || len(n.state.Unrestored()) != 0 {
				t.Fatalf("report: %+v, unrestored %v", report, n.state.Unrestored())
			}
			after, _ := n.store.Get("uid-killed")
			if after.Devices[0].Mig.GIID < 0 || after.Devices[0].UUID == "" || n.sim.MigInstanceCount(n.uuid(0)) != 1 {
				t.Fatalf("not adopted: %+v, %d MIG devices", after.Devices[0], n.sim.MigInstanceCount(n.uuid(0)))
			}
			n.unprepare(c)
			if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
				t.Errorf("%d MIG devices left", got)
			}
		})
	}
}

// TestFailedRestoreUndoesTheTimeSlice (defect 9): a restore that fails on
// a later device undoes the time slice it set on an earlier one.
func TestFailedRestoreUndoesTheTimeSlice(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-ts", result{request: "whole", device: "gpu-1"}, result{request: "small", device: n.mig(0, "1g.10gb", 0)})
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, testDriver, []string{"whole"}, timeSlice("Long"))}
	n.prepare(c)
	if got := n.sim.TimeSlice(n.uuid(1)); got != "Long" {
		t.Fatalf("time slice %s after prepare", got)
	}
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	// Something else took GPU 0 meanwhile: the MIG device cannot be made.
	if _, err := createMig(n, n.mig(0, "7g.80gb", 0)); err != nil {
		t.Fatal(err)
	}
	n.restart()
	if r := n.state.RecoverLocal(t.Context()); r.Unrestored != 1 {
		t.Fatalf("report: %+v", r)
	}
	if got := n.sim.TimeSlice(n.uuid(1)); got != "Default" {
		t.Errorf("time slice %s left on GPU 1 by the failed restore, want Default", got)
	}
}

// TestUnreadableNewerRecordKeepsEveryMigDevice (defect 2): when a newer
// driver's record cannot be read at all, what it owns is unknown, so
// start destroys no MIG device and stops no MPS daemon as unowned.
func TestUnreadableNewerRecordKeepsEveryMigDevice(t *testing.T) {
	n := newNode(t, "h100x1", true)
	if _, err := createMig(n, n.mig(0, "1g.10gb", 0)); err != nil {
		t.Fatal(err)
	}
	payload := `"a future layout"`
	data := fmt.Sprintf(`{"version":"gpu.nvidia.com/checkpoint/v9","checksum":%d,"claim":%s}`, crc32.ChecksumIEEE([]byte(payload)), payload)
	if err := os.WriteFile(filepath.Join(n.dir, "checkpoint", "uid-future.json"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	n.restart()
	runner := &countingRunner{}
	mpsRoot := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mpsRoot, n.uuid(0)), 0o750); err != nil {
		t.Fatal(err)
	}
	n.state.Sharing.MPS = &sharing.MPS{Root: mpsRoot, Runner: runner}
	if r := n.state.RecoverLocal(t.Context()); r.UnownedMig != 0 || n.sim.MigInstanceCount(n.uuid(0)) != 1 {
		t.Errorf("a MIG device the unreadable record may own was destroyed: %+v", r)
	}
	if _, err := n.state.RemoveStale(t.Context(), getter(map[string]any{})); err != nil {
		t.Fatal(err)
	}
	if runner.stopped != 0 {
		t.Error("an MPS daemon the unreadable record may own was stopped")
	}
}

// TestRestoreRetryChecksOtherClaims (defect 5): the kubelet's retry of an
// unrestored claim does not configure its devices under another claim's:
// here a record (of an older driver, say) names a MIG device on a GPU
// that another claim uses whole.
func TestRestoreRetryChecksOtherClaims(t *testing.T) {
	n := newNode(t, "h100x1", true)
	n.prepare(claim("uid-whole", dev("gpu-0")))
	name := n.mig(0, "1g.10gb", 0)
	c := claim("uid-waiting", dev(name))
	rec := checkpoint.PreparedClaim{UID: "uid-waiting", Namespace: "ns", Name: c.Name, State: checkpoint.RestorePending, BootID: n.sim.BootID(),
		Devices: []checkpoint.PreparedDevice{{Requests: []string{"gpu"}, Pool: testPool, Device: name, Type: "mig",
			CDIDeviceIDs: []string{n.cdi.DeviceID("uid-waiting", name)},
			Mig:          &checkpoint.MigRecord{ParentUUID: n.uuid(0), Profile: "1g.10gb", Start: 0, Size: 1, Dynamic: true, GIID: -1, CIID: -1}}}}
	if err := n.store.Put(rec); err != nil {
		t.Fatal(err)
	}
	_, err := n.tryPrepare(c)
	if err == nil || !strings.Contains(err.Error(), "uid-whole") {
		t.Errorf("retry of the waiting claim: %v, want a refusal naming uid-whole", err)
	}
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
		t.Errorf("the retry made %d MIG devices on the GPU claim uid-whole uses whole", got)
	}
}
