// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startFailRunner has no daemon and cannot start one.
type startFailRunner struct{ listRunner }

func (r *startFailRunner) Start(context.Context, *Daemon) error {
	return errors.New("image pull failed")
}

func TestEnsureReportsADaemonThatDoesNotStart(t *testing.T) {
	m := &MPS{Root: t.TempDir(), Runner: &startFailRunner{}, ReadyTimeout: time.Second}
	d := m.Daemon("GPU-a")
	err := m.Ensure(d)
	if err == nil || !strings.Contains(err.Error(), "start MPS control daemon for GPU-a") || !strings.Contains(err.Error(), "image pull failed") {
		t.Fatalf("Ensure with a runner that cannot start: %v", err)
	}
	// Its directories were made for it all the same.
	for _, dir := range []string{d.PipeDir(), d.LogDir(), d.ShmDir()} {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

// A state directory that cannot hold the daemon's directories is an error
// before anything is started.
func TestEnsureWithoutADaemonDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &listRunner{}
	m := &MPS{Root: file, Runner: r, ReadyTimeout: time.Second}
	err := m.Ensure(m.Daemon("GPU-a"))
	if err == nil || !strings.Contains(err.Error(), "MPS daemon dir") {
		t.Fatalf("Ensure under a file: %v", err)
	}
	if len(r.started) != 0 {
		t.Errorf("started %v without its directories", r.started)
	}
}

// What a dead daemon left in its pipe directory is removed before a new
// one starts (a stale control pipe would pass for a ready daemon); the
// pipes of a running daemon are left alone.
func TestEnsureClearsADeadDaemonsPipes(t *testing.T) {
	f := &fakeRunner{running: map[string]bool{}}
	m := &MPS{Root: t.TempDir(), Runner: f, ReadyTimeout: 100 * time.Millisecond}
	d := m.Daemon("GPU-a")
	if err := os.MkdirAll(d.PipeDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.ControlPipe(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The new daemon never makes a pipe: the stale one must not count.
	err := m.Ensure(d)
	if err == nil || !strings.Contains(err.Error(), "did not appear") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Ensure with only a stale control pipe: %v", err)
	}
	if f.starts != 1 {
		t.Errorf("%d starts, want 1", f.starts)
	}
	// Now it runs and has its pipe: Ensure neither restarts nor clears it.
	if err := os.WriteFile(d.ControlPipe(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(d); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.ControlPipe()); err != nil || f.starts != 1 {
		t.Errorf("running daemon: pipe %v, %d starts", err, f.starts)
	}
}
