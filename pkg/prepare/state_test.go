// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// TestPrepareIsIdempotent: the kubelet repeats a prepare after a timeout or
// a plugin restart; the second call answers the same IDs without creating
// anything again, and keeps the device status written.
func TestPrepareIsIdempotent(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-1", dev(n.mig(0, "1g.10gb", 3)))
	first := n.prepare(c)
	if len(first) != 1 || len(first[0].CDIDeviceIDs) != 1 || first[0].DeviceName != c.Status.Allocation.Devices.Results[0].Device || first[0].PoolName != testPool {
		t.Fatalf("first prepare answered %+v", first)
	}
	rec, ok := n.store.Get("uid-1")
	if !ok || rec.State != checkpoint.PrepareCompleted || rec.Devices[0].Mig.GIID < 0 || rec.Devices[0].UUID == "" {
		t.Fatalf("record after prepare: %+v", rec)
	}
	second := n.prepare(c)
	if !slices.Equal(first[0].CDIDeviceIDs, second[0].CDIDeviceIDs) {
		t.Fatalf("second prepare answered %v, first %v", second[0].CDIDeviceIDs, first[0].CDIDeviceIDs)
	}
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 1 {
		t.Fatalf("%d GPU instances after two prepares of one MIG claim, want 1", got)
	}
	if again, _ := n.store.Get("uid-1"); again.Devices[0].UUID != rec.Devices[0].UUID || again.Devices[0].Mig.GIID != rec.Devices[0].Mig.GIID {
		t.Fatalf("second prepare changed the record: %+v, was %+v", again.Devices[0], rec.Devices[0])
	}
	if got := n.status.count("uid-1"); got != 2 {
		t.Fatalf("device status reported %d times, want once per prepare (2)", got)
	}
	if got := n.state.Ledger.View().PreparedDevices(); got != 1 {
		t.Fatalf("PreparedDevices = %d, want 1", got)
	}
}

// TestUnprepareIsIdempotent: unprepare undoes everything (MIG instance, MIG
// mode, spec, record); repeating it, or unpreparing a claim never seen, is
// no error and still removes a stray spec.
func TestUnprepareIsIdempotent(t *testing.T) {
	n := newNode(t, "h100x1", true)
	c := claim("uid-1", dev(n.mig(0, "3g.40gb", 4)))
	n.prepare(c)
	if n.migMode(0) != nvml.DEVICE_MIG_ENABLE {
		t.Fatal("MIG mode not turned on for a dynamic MIG device")
	}
	n.unprepare(c)
	n.unprepare(c)
	n.assertGone("uid-1")
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
		t.Fatalf("%d GPU instances left after unprepare", got)
	}
	if n.migMode(0) != nvml.DEVICE_MIG_DISABLE {
		t.Fatal("MIG mode left on with no instance left")
	}
	// A spec without a record (a crash between the two) is removed too.
	stray := claim("uid-2", dev("gpu-0"))
	if err := n.cdi.Write("uid-2", []cdiDevice{{Name: "gpu-0", UUID: n.uuid(0)}}, nil); err != nil {
		t.Fatal(err)
	}
	n.unprepare(stray)
	n.assertGone("uid-2")
	// Whole again: usable as a GPU.
	n.prepare(claim("uid-3", dev("gpu-0")))
}

// TestInvalidClaimUIDIsRefused: a UID ends up in file names.
func TestInvalidClaimUIDIsRefused(t *testing.T) {
	n := newNode(t, "h100x1", false)
	if _, err := n.state.Prepare(context.Background(), claim("../x", dev("gpu-0"))); err == nil || !strings.Contains(err.Error(), "not a valid UID") {
		t.Fatalf("prepare with UID ../x: %v", err)
	}
	if err := n.state.Unprepare(context.Background(), ref(claim("a/b", dev("gpu-0")))); err == nil {
		t.Fatal("unprepare accepted UID a/b")
	}
}

// TestCDIWriteFailureRollsBack: a failed spec write undoes the MIG devices
// already created, leaves no record or spec, and releases the GPU's lock
// and reservation, so that the retry and other claims go through.
func TestCDIWriteFailureRollsBack(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-1", dev(n.mig(0, "1g.10gb", 0)), dev(n.mig(1, "2g.20gb", 2)))
	n.edits.fail.Store(true)
	if _, err := n.tryPrepare(c); !errors.Is(err, errInjectedCDI) {
		t.Fatalf("prepare with a failing CDI write: %v", err)
	}
	n.assertGone("uid-1")
	for minor := range 2 {
		if got := n.sim.MigInstanceCount(n.uuid(minor)); got != 0 {
			t.Errorf("GPU %d: %d GPU instances left after the rollback", minor, got)
		}
		if n.migMode(minor) != nvml.DEVICE_MIG_DISABLE {
			t.Errorf("GPU %d: MIG mode left on after the rollback", minor)
		}
	}
	if n.status.count("uid-1") != 0 {
		t.Error("device status reported for a failed prepare")
	}
	n.edits.fail.Store(false)
	// Another claim on the same GPU, then the retry itself.
	n.prepare(claim("uid-2", dev("gpu-1")))
	n.unprepare(claim("uid-2", dev("gpu-1")))
	n.prepare(c)
	if n.sim.MigInstanceCount(n.uuid(0)) != 1 || n.sim.MigInstanceCount(n.uuid(1)) != 1 {
		t.Fatal("retry did not create one instance per GPU")
	}
}

// TestMigCreateFailureRollsBack: the second device fails in NVML after the
// first was created; the first is destroyed and its GPU leaves MIG mode.
func TestMigCreateFailureRollsBack(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-1", dev(n.mig(0, "1g.10gb", 0)), dev(n.mig(1, "1g.10gb", 0)))
	if err := n.sim.SetFault(n.uuid(1), nvml.ERROR_UNKNOWN); err != nil {
		t.Fatal(err)
	}
	_, err := n.tryPrepare(c)
	if err == nil || !strings.Contains(err.Error(), "device "+n.mig(1, "1g.10gb", 0)) {
		t.Fatalf("prepare with a failing GPU: %v, want an error naming the device", err)
	}
	n.assertGone("uid-1")
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
		t.Fatalf("GPU 0: %d GPU instances left after the rollback", got)
	}
	if n.migMode(0) != nvml.DEVICE_MIG_DISABLE {
		t.Fatal("GPU 0: MIG mode left on after the rollback")
	}
	if err := n.sim.SetFault(n.uuid(1), nvml.SUCCESS); err != nil {
		t.Fatal(err)
	}
	n.prepare(c)
}

// TestPrivilegeFailureRollsBack: without the privilege to create MIG
// devices, nothing is left behind, and the error says what NVML said.
func TestPrivilegeFailureRollsBack(t *testing.T) {
	n := newNode(t, "h100x1", true)
	if err := n.sim.SetUnprivileged(true); err != nil {
		t.Fatal(err)
	}
	c := claim("uid-1", dev(n.mig(0, "7g.80gb", 0)))
	if _, err := n.tryPrepare(c); err == nil || !strings.Contains(err.Error(), "NO_PERMISSION") {
		t.Fatalf("unprivileged MIG prepare: %v", err)
	}
	n.assertGone("uid-1")
	if err := n.sim.SetUnprivileged(false); err != nil {
		t.Fatal(err)
	}
	n.prepare(claim("uid-2", dev("gpu-0")))
}

// TestHalfwayPrepareIsRolledBackOnRetry: a record left as PrepareStarted
// (the plugin died mid-prepare) is undone before the claim is prepared
// again; the instance the dead attempt created is not leaked.
func TestHalfwayPrepareIsRolledBackOnRetry(t *testing.T) {
	n := newNode(t, "h100x1", true)
	name := n.mig(0, "1g.10gb", 5)
	c := claim("uid-1", dev(name))
	inst, err := createMig(n, name)
	if err != nil {
		t.Fatal(err)
	}
	rec := checkpoint.PreparedClaim{UID: "uid-1", Namespace: "ns", Name: c.Name, State: checkpoint.PrepareStarted,
		Devices: []checkpoint.PreparedDevice{{Pool: testPool, Device: name, Type: "mig", UUID: inst.UUID,
			Mig: &checkpoint.MigRecord{ParentUUID: n.uuid(0), Dynamic: true, GIID: inst.GIID, CIID: inst.CIID}}}}
	if err := n.store.Put(rec); err != nil {
		t.Fatal(err)
	}
	n.prepare(c)
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 1 {
		t.Fatalf("%d GPU instances after the retry, want 1 (the dead attempt's destroyed)", got)
	}
	if got, _ := n.store.Get("uid-1"); got.State != checkpoint.PrepareCompleted {
		t.Fatalf("record after the retry: %+v", got)
	}
}
