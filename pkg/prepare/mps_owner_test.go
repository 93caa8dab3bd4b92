// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

const mpsConfig = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`

func mpsNode(t *testing.T) (*node, *countingRunner, string) {
	n := newNode(t, "h100x2", false)
	runner, root := &countingRunner{}, t.TempDir()
	n.state.Sharing.Allowed[configapi.MpsStrategy] = true
	m := &sharing.MPS{Root: root, Runner: runner}
	n.state.Sharing.MPS = m
	return n, runner, root
}

// daemonsUp makes the control pipes of the GPUs' daemons, as running
// daemons (countingRunner's) have them.
func daemonsUp(t *testing.T, n *node) {
	for i := range n.inv.GPUs {
		pipe := n.state.Sharing.MPS.Daemon(n.uuid(i)).ControlPipe()
		if err := os.MkdirAll(filepath.Dir(pipe), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pipe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A daemon on a GPU whose lock a prepare holds (it may have started the
// daemon and not recorded it yet: a dynamic MIG device's UUID is recorded
// at the end) is not stopped as unowned; once the GPU is free, one that no
// record uses is.
func TestUnownedMPSReadUnderTheGPULock(t *testing.T) {
	n, runner, root := mpsNode(t)
	if err := os.MkdirAll(filepath.Join(root, n.uuid(0)), 0o750); err != nil {
		t.Fatal(err)
	}
	unlock := n.state.deviceLocks.Lock(n.uuid(0)) // a prepare in flight on GPU 0
	var report RecoveryReport
	n.state.stopUnownedMPS(klog.Background(), &report)
	if runner.stopped != 0 {
		t.Fatal("the daemon of a GPU a prepare holds was stopped as unowned")
	}
	unlock()
	n.state.stopUnownedMPS(klog.Background(), &report)
	if runner.stopped != 1 {
		t.Fatalf("an unowned daemon on a free GPU: %d stops, want 1", runner.stopped)
	}
}

// The supervisor restarts a daemon only for the allocation it listed: a
// claim unprepared and prepared again (same UID) on another GPU meanwhile
// gets no daemon on its old GPU.
func TestSupervisorRestartsOnlyTheListedAllocation(t *testing.T) {
	n, _, _ := mpsNode(t)
	daemonsUp(t, n)
	withMPS := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, opaque(resourceapi.AllocationConfigSourceClaim, testDriver, []string{"gpu"}, mpsConfig))
		return c
	}
	first := withMPS(claim("uid-m", dev("gpu-0")))
	n.prepare(first)
	listed, _ := n.store.Get("uid-m")
	if !n.state.superviseDevice(t.Context(), listed, listed.Devices[0]) {
		t.Fatal("the supervisor skipped the daemon of a prepared claim")
	}
	n.unprepare(first)
	n.prepare(withMPS(claim("uid-m", dev("gpu-1"))))
	if n.state.superviseDevice(t.Context(), listed, listed.Devices[0]) {
		t.Fatal("the supervisor restarted the daemon of an allocation the claim no longer has")
	}
}
