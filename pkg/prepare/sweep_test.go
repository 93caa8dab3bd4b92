// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"os"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// sweepingRunner runs MPS daemons as control pipes, and calls during
// each start what the test wants to happen beside it.
type sweepingRunner struct {
	mu      sync.Mutex
	running map[string]bool
	stopped []string
	onStart func(d *sharing.Daemon)
}

func (r *sweepingRunner) Start(_ context.Context, d *sharing.Daemon) error {
	if err := os.MkdirAll(d.PipeDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(d.ControlPipe(), nil, 0o600); err != nil {
		return err
	}
	r.mu.Lock()
	r.running[d.DeviceUUID] = true
	on := r.onStart
	r.mu.Unlock()
	if on != nil {
		on(d)
	}
	return nil
}

func (r *sweepingRunner) Running(_ context.Context, d *sharing.Daemon) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[d.DeviceUUID], nil
}

func (r *sweepingRunner) Stop(_ context.Context, d *sharing.Daemon) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, d.DeviceUUID)
	r.stopped = append(r.stopped, d.DeviceUUID)
	return os.RemoveAll(d.PipeDir())
}

func (r *sweepingRunner) List(context.Context) ([]string, error) { return nil, nil }

// Issue 47, defect 3: the start-up sweep of unowned MPS daemons runs in
// the background, beside the kubelet's prepares. A prepare of a dynamic
// MIG device under MPS starts the daemon of a MIG device whose UUID its
// record does not name yet (it is recorded once the daemon is up). The
// sweep must take that daemon for its GPU's, lock the parent GPU (which
// the prepare holds) and leave it: not lock the MIG UUID, which nothing
// holds, find no owner and stop it under the prepare.
func TestSweepBesidePrepareOfMigDeviceUnderMPS(t *testing.T) {
	n := newNode(t, "h100x1", true)
	runner := &sweepingRunner{running: map[string]bool{}}
	n.state.Sharing.Allowed[configapi.MpsStrategy] = true
	n.state.Sharing.MPS = &sharing.MPS{Root: t.TempDir(), Runner: runner, ReadyTimeout: 2e9}
	swept := 0
	runner.onStart = func(*sharing.Daemon) {
		// The sweep, in the background, while the prepare waits for its
		// daemon: RemoveStale ends with it.
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := n.state.RemoveStale(context.Background(), getter(map[string]any{})); err != nil {
				t.Errorf("remove stale: %v", err)
			}
			swept++
		}()
		<-done
	}
	c := claim("uid-mig-mps", dev(n.mig(0, "1g.10gb", 0)))
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, testDriver, nil,
		`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS"}}`)}
	n.prepare(c)
	if swept != 1 {
		t.Fatalf("the sweep ran %d times beside the prepare, want 1", swept)
	}
	rec, _ := n.store.Get(c.UID)
	target := rec.Devices[0].Sharing.Target
	if target == "" || target == n.uuid(0) {
		t.Fatalf("the MIG device's MPS target is %q", target)
	}
	if len(runner.stopped) != 0 || !runner.running[target] {
		t.Fatalf("the sweep stopped %v beside the prepare that started the daemon of %s (running: %v)", runner.stopped, target, runner.running)
	}
	// Once the prepare is done, the record names the daemon: the next
	// sweep keeps it, and unprepare stops it.
	runner.onStart = nil
	if _, err := n.state.RemoveStale(t.Context(), getter(map[string]any{c.Name: c})); err != nil {
		t.Fatal(err)
	}
	if len(runner.stopped) != 0 {
		t.Fatalf("a sweep after the prepare stopped %v", runner.stopped)
	}
	n.unprepare(c)
	if len(runner.stopped) != 1 || runner.stopped[0] != target {
		t.Fatalf("unprepare stopped %v, want the daemon of %s", runner.stopped, target)
	}
}
