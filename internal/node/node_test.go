// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
)

// A claim prepared on the node leaves a CDI spec and a record; unprepared,
// nothing; Close removes the node's directories.
func TestPrepareUnprepareLeavesNothing(t *testing.T) {
	ctx := context.Background()
	start := func(ctx context.Context, dirs Dirs, client kubernetes.Interface, be *backend.Backend) (Plugin, error) {
		d, err := driver.Start(ctx, driver.Config{DriverName: "gpu.nvidia.com", NodeName: "node-test", Client: client, Backend: be,
			StateDir: dirs.State, CDIDir: dirs.CDI, PluginDir: dirs.Plugin, RegistrarDir: dirs.Registry})
		if err != nil {
			return nil, err
		}
		return d, nil
	}
	n, err := New(Config{DriverName: "gpu.nvidia.com", NodeName: "node-test", Start: start})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	be, err := backend.Open(backend.Options{SimulateProfile: "h100x2", NodeName: n.NodeName, StateDir: n.StateDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx, be); err != nil {
		t.Fatal(err)
	}
	claim := schedtest.Claim("one", schedtest.Request("gpu", "gpu.nvidia.com", 1))
	claim.Status.Allocation = schedtest.NewFromSlices(t, n.NodeName, n.Slices).Allocate(claim)
	r, err := n.Prepare(ctx, claim)
	if err != nil || len(r.Devices) != 1 {
		t.Fatalf("prepare: %v %v", r, err)
	}
	left, err := n.Leftovers()
	if err != nil || len(left.CDISpecs) != 1 || len(left.Records) != 1 {
		t.Fatalf("while prepared: %+v %v", left, err)
	}
	if err := n.Unprepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if left, err := n.Leftovers(); err != nil || !left.Empty() {
		t.Fatalf("after unprepare: %+v %v", left, err)
	}
	n.Close()
	if _, err := os.Stat(n.Root); !os.IsNotExist(err) {
		t.Errorf("root %s after Close: %v", n.Root, err)
	}
}

// Fatalf unwinds to Recover, running the deferred calls on the way, and
// the function returns the failure.
func TestRecorderReturnsTheFailure(t *testing.T) {
	cleaned := false
	run := func() (err error) {
		rec := &Recorder{}
		defer rec.Recover(&err)
		defer func() { cleaned = true }()
		schedtest.NewFromSlices(rec, "n", nil).Allocate(schedtest.Claim("c", schedtest.Request("r", "no-such-class", 1)))
		t.Fatal("Allocate returned after a failure")
		return nil
	}
	err := run()
	if err == nil || !strings.Contains(err.Error(), "allocate c") || !cleaned {
		t.Fatalf("err %v, cleaned %v", err, cleaned)
	}
}
