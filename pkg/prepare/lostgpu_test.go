// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// A GPU falls off the bus while the plugin runs (issue 55, defect 3): NVML
// answers GPU_IS_LOST for it, so its dynamic MIG device cannot be
// destroyed. Unprepare releases everything else of the claim, and the
// claim's record; what stays on the lost GPU is recorded and released
// when the GPU answers again.

// migStarts are the placements of the MIG devices that exist on GPU minor.
func (n *node) migStarts(minor int) []uint32 {
	n.t.Helper()
	g := n.inv.GPUs[minor]
	existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles)
	if err != nil {
		n.t.Fatalf("list MIG devices of GPU %d: %v", minor, err)
	}
	var out []uint32
	for _, m := range existing {
		out = append(out, m.Placement.Start)
	}
	return out
}

// leftovers are the records that hold what unprepares left on lost GPUs.
func (n *node) leftovers() []checkpoint.PreparedClaim {
	var out []checkpoint.PreparedClaim
	for _, rec := range n.store.List() {
		if _, ok := leftoverOf(rec.UID); ok {
			out = append(out, rec)
		}
	}
	return out
}

func (n *node) setLost(minor int, lost bool) {
	n.t.Helper()
	if err := n.sim.SetLost(n.uuid(minor), lost); err != nil {
		n.t.Fatal(err)
	}
}

// TestUnprepareOnALostGPU: the claim's MIG device on the healthy GPU, its
// CDI spec and its record go at once; the other claim on that GPU and new
// claims there are untouched; the lost GPU's MIG device is recorded,
// holds its placement, and is destroyed once the GPU answers again.
func TestUnprepareOnALostGPU(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-lost", dev(n.mig(0, "1g.10gb", 0)), dev(n.mig(1, "1g.10gb", 0)))
	other := claim("uid-other", dev(n.mig(1, "1g.10gb", 1)))
	n.prepare(c)
	n.prepare(other)

	n.setLost(0, true)
	n.unprepare(c)
	n.assertGone(c.UID)
	if got := n.migStarts(1); len(got) != 1 || got[0] != 1 {
		t.Errorf("GPU 1 has MIG devices at %v, want only the other claim's at 1", got)
	}
	left := n.leftovers()
	if len(left) != 1 || len(left[0].Devices) != 1 || left[0].Devices[0].Mig.ParentUUID != n.uuid(0) {
		t.Fatalf("leftovers %+v, want the lost GPU's MIG device alone", left)
	}

	// The rest of the node serves: GPU 1 prepares and unprepares, the
	// kubelet's repeated unprepare is a no-op, and the lost GPU's
	// placement is not handed out again meanwhile.
	again := claim("uid-again", dev(n.mig(1, "1g.10gb", 0)))
	n.prepare(again)
	n.unprepare(again)
	n.unprepare(other)
	n.unprepare(c)
	if got := n.migStarts(1); len(got) != 0 {
		t.Errorf("GPU 1 still has MIG devices at %v", got)
	}
	if _, err := n.tryPrepare(claim("uid-taker", dev(n.mig(0, "1g.10gb", 0)))); err == nil || !strings.Contains(err.Error(), string(left[0].UID)) {
		t.Errorf("prepare on the lost GPU's leftover placement: %v, want it refused as held by %s", err, left[0].UID)
	}

	// Still lost: nothing to release yet.
	if released, err := n.state.ReleaseLeftovers(t.Context()); err != nil || released != 0 || len(n.leftovers()) != 1 {
		t.Fatalf("while the GPU is lost: released %d (%v), leftovers %+v", released, err, n.leftovers())
	}
	n.setLost(0, false)
	if got := n.migStarts(0); len(got) != 1 {
		t.Fatalf("the returned GPU has MIG devices at %v, want the claim's", got)
	}
	if released, err := n.state.ReleaseLeftovers(t.Context()); err != nil || released != 1 {
		t.Errorf("released %d leftovers once the GPU answers (%v), want 1", released, err)
	}
	if got := n.migStarts(0); len(got) != 0 {
		t.Errorf("the returned GPU still has MIG devices at %v", got)
	}
	if n.migMode(0) != nvml.DEVICE_MIG_DISABLE {
		t.Error("MIG mode stays on on the empty GPU")
	}
	if recs := n.store.List(); len(recs) != 0 {
		t.Errorf("records left: %+v", recs)
	}
	n.prepare(claim("uid-taker", dev(n.mig(0, "1g.10gb", 0))))
}

// TestLostGPULeftoversAtStart: a plugin restarted while the GPU is still
// lost keeps the leftover and reports it; one restarted after the GPU
// came back releases it before the kubelet is served.
func TestLostGPULeftoversAtStart(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-lost", dev(n.mig(0, "2g.20gb", 0)), dev("gpu-1"))
	n.prepare(c)
	n.setLost(0, true)
	n.unprepare(c)
	n.assertGone(c.UID)

	n.restart()
	report := n.state.RecoverLocal(t.Context())
	if len(n.leftovers()) != 1 || !strings.Contains(strings.Join(report.Problems, "\n"), "lost") {
		t.Fatalf("start with the GPU still lost: leftovers %+v, problems %q; want the leftover kept and reported", n.leftovers(), report.Problems)
	}

	n.setLost(0, false)
	n.restart()
	report = n.state.RecoverLocal(t.Context())
	if len(report.Problems) != 0 || len(n.store.List()) != 0 || len(n.migStarts(0)) != 0 {
		t.Errorf("start with the GPU back: problems %q, records %+v, MIG devices at %v; want all released", report.Problems, n.store.List(), n.migStarts(0))
	}
}

// TestLeftoverNames: a leftover's record is named after its claim, and a
// second leftover of the same claim UID gets a name of its own.
func TestLeftoverNames(t *testing.T) {
	for uid, want := range map[types.UID]bool{
		"uid-1.lost": true, "uid-1.lost-2": true, "uid-1": false, "uid-1.lost-": false, "uid-1.lost-x": false,
	} {
		claim, ok := leftoverOf(uid)
		if ok != want || (ok && claim != "uid-1") {
			t.Errorf("leftoverOf(%s) = %s, %v", uid, claim, ok)
		}
	}
	if !checkpoint.ValidToken(string(leftoverUID("0f7c8e2a-1b2c-4d5e-8f90-0123456789ab", 12))) {
		t.Error("a leftover UID is not a valid record name")
	}
}

// TestPeriodicPassReleasesLeftovers: the node's periodic pass releases a
// leftover once its GPU answers again, on a node without sharing too.
func TestPeriodicPassReleasesLeftovers(t *testing.T) {
	n := newNode(t, "h100x2", true)
	c := claim("uid-lost", dev(n.mig(0, "1g.10gb", 0)))
	n.prepare(c)
	n.setLost(0, true)
	n.unprepare(c)
	n.state.Sharing = nil
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.state.SuperviseSharing(ctx, 10*time.Millisecond)
	}()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond)
	if len(n.leftovers()) != 1 {
		t.Fatalf("leftovers while the GPU is lost: %+v", n.leftovers())
	}
	n.setLost(0, false)
	deadline := time.Now().Add(10 * time.Second)
	for len(n.store.List()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("records left 10s after the GPU came back: %+v", n.store.List())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := n.migStarts(0); len(got) != 0 {
		t.Errorf("MIG devices left at %v", got)
	}
}
