// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

func open(t *testing.T, dir string) *Ledger {
	t.Helper()
	store, _, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := New(store)
	l.HoldAll()
	return l
}

func claimOf(uid types.UID, devs ...checkpoint.PreparedDevice) checkpoint.PreparedClaim {
	return checkpoint.PreparedClaim{UID: uid, Namespace: "ns", Name: string(uid), State: checkpoint.PrepareStarted, Devices: devs}
}

// A claim's hold starts with its first record and ends with its release;
// a restarted ledger holds what the records on disk name, whether or not
// anything else is known about them.
func TestHoldsFollowRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checkpoint")
	l := open(t, dir)
	if err := l.Begin(claimOf("vm", vm("GPU-0"))); err != nil {
		t.Fatal(err)
	}
	if err := l.Begin(claimOf("pod", whole("GPU-0"))); err == nil || !strings.Contains(err.Error(), "claim vm") {
		t.Fatalf("a whole GPU beside a VM's: %v", err)
	}
	if _, ok := l.Get("pod"); ok {
		t.Fatal("a refused claim has a record")
	}
	if err := l.Begin(claimOf("other", whole("GPU-1"))); err != nil {
		t.Fatal(err)
	}

	l = open(t, dir) // a restart
	if err := l.Begin(claimOf("pod", place("GPU-0", 0, 1))); err == nil {
		t.Fatal("after a restart a MIG device was prepared on a VM's GPU")
	}
	if err := l.CheckHeld(claimOf("rebuilt", whole("GPU-1"))); err == nil || !strings.Contains(err.Error(), "claim other") {
		t.Fatalf("a record overlapping another holder's: %v", err)
	}
	if err := l.Release("vm"); err != nil {
		t.Fatal(err)
	}
	if err := l.Begin(claimOf("pod", place("GPU-0", 0, 1))); err != nil {
		t.Fatalf("after the VM's release: %v", err)
	}
	if got := l.View().Passthrough(); len(got) != 0 {
		t.Fatalf("VM GPUs after release: %v", got)
	}
}

// A claim that names one GPU's hardware twice is refused before anything
// is written.
func TestBeginRefusesOverlapWithinAClaim(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "checkpoint"))
	err := l.Begin(claimOf("c", whole("GPU-0"), place("GPU-0", 0, 1)))
	if err == nil || !strings.Contains(err.Error(), "same GPU hardware") {
		t.Fatalf("whole GPU and its MIG device in one claim: %v", err)
	}
	if len(l.Claims()) != 0 {
		t.Fatal("a refused claim was recorded")
	}
}
