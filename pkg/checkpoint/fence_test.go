// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
)

func takeOver(t *testing.T, f *Fence) func() {
	t.Helper()
	release, err := f.TakeOver()
	if err != nil {
		t.Fatalf("take over: %v", err)
	}
	return release
}

// TestFenceCallsShareTheLock: calls of the owning instance run side by
// side; only a take-over is exclusive.
func TestFenceCallsShareTheLock(t *testing.T) {
	dir := t.TempDir()
	f, err := NewFence(dir, "pod-1")
	if err != nil {
		t.Fatal(err)
	}
	takeOver(t, f)()
	leave1, err := f.Enter()
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() {
		leave, err := f.Enter()
		if err == nil {
			leave()
		}
		second <- err
	}()
	if err := testwait.Receive(t, second, "second call while the first is in flight"); err != nil {
		t.Fatal(err)
	}
	leave1()
	if got, _ := os.ReadFile(filepath.Join(dir, ".owner")); string(got) != "pod-1" {
		t.Fatalf("owner file says %q", got)
	}
}

// TestFenceOldCallsWaitForTakeOverThenFail: a call of the older instance
// that arrives while the newer one recovers waits for it, then is told it
// was superseded: it never runs against state the newer one is rebuilding.
func TestFenceOldCallsWaitForTakeOverThenFail(t *testing.T) {
	dir := t.TempDir()
	old, _ := NewFence(dir, "old")
	takeOver(t, old)()
	newer, _ := NewFence(dir, "new")
	release := takeOver(t, newer)
	entered := make(chan error, 1)
	go func() {
		leave, err := old.Enter()
		if err == nil {
			leave()
		}
		entered <- err
	}()
	select {
	case err := <-entered:
		t.Fatalf("older instance's call ran during the take-over: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := testwait.Receive(t, entered, "older call after the take-over"); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("older call after the take-over: %v, want ErrSuperseded", err)
	}
	leave, err := newer.Enter()
	if err != nil {
		t.Fatalf("newer instance: %v", err)
	}
	leave()
}

// TestFenceRestartWithSameToken: a container restarted in the same pod
// keeps its token and takes over from itself.
func TestFenceRestartWithSameToken(t *testing.T) {
	dir := t.TempDir()
	first, _ := NewFence(dir, "pod-1")
	takeOver(t, first)()
	again, _ := NewFence(dir, "pod-1")
	takeOver(t, again)()
	for _, f := range []*Fence{first, again} {
		leave, err := f.Enter()
		if err != nil {
			t.Fatalf("same token after restart: %v", err)
		}
		leave()
	}
}

// TestFenceNeedsAnOwner: a call before any take-over is an error (the
// plugin serves only after recovery), not a pass.
func TestFenceNeedsAnOwner(t *testing.T) {
	f, _ := NewFence(t.TempDir(), "pod-1")
	if leave, err := f.Enter(); err == nil {
		leave()
		t.Fatal("Enter succeeded with no owner recorded")
	}
	if _, err := NewFence(filepath.Join(t.TempDir(), "file"), "x"); err != nil {
		t.Fatal(err)
	}
	blocker := filepath.Join(t.TempDir(), "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFence(filepath.Join(blocker, "dir"), "x"); err == nil {
		t.Fatal("NewFence under a regular file succeeded")
	}
}
