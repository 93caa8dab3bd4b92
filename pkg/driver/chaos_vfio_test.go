// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// vfioState is the binding of simulated GPU i and the IOMMU group node,
// read from the files as an operator would (sysfs.go in pkg/simulate).
func vfioState(t *testing.T, root string, i int) (driver string, groupNode bool) {
	t.Helper()
	sim := filepath.Join(root, "state", "simulated")
	target, err := os.Readlink(filepath.Join(sim, "sys", "bus", "pci", "devices", simulate.PCIBusID(i), "driver"))
	if err == nil {
		driver = filepath.Base(target)
	}
	_, err = os.Stat(filepath.Join(sim, "dev", "vfio", simulate.IOMMUGroup(i)))
	return driver, err == nil
}

// requireBoundAsRecorded checks the invariant of passthrough after a
// start: the GPU is on vfio-pci exactly when a prepared record holds it.
func requireBoundAsRecorded(t *testing.T, root string, i int, when string) string {
	t.Helper()
	records, err := checkpoint.ReadOnly(filepath.Join(root, "state", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	want := vfio.DriverNvidia
	for _, rec := range records {
		for _, d := range rec.Devices {
			if d.Vfio != nil && d.Vfio.PCIBusID == simulate.PCIBusID(i) {
				if !rec.Prepared() {
					t.Fatalf("%s: a started passthrough record survived the start: %+v", when, rec)
				}
				want = vfio.DriverVFIO
			}
		}
	}
	got, node := vfioState(t, root, i)
	if got != want || node != (want == vfio.DriverVFIO) {
		t.Fatalf("%s: GPU %d bound to %q (group node %v), its record says %q", when, i, got, node, want)
	}
	return got
}

// TestChaosPassthrough SIGKILLs a plugin process at random points of a
// passthrough prepare and unprepare (each sysfs write takes 15ms, so that
// kills land between the writes of a bind), and reboots the simulated
// node under a prepared claim. After every start the GPU is bound as its
// record says; once the claim is gone it is on nvidia and NVML sees it.
func TestChaosPassthrough(t *testing.T) {
	rounds := 4
	if v, err := strconv.Atoi(os.Getenv("GDRA_CHAOS_ROUNDS")); err == nil {
		rounds = v
	}
	if testing.Short() {
		rounds = 1
	}
	root, err := os.MkdirTemp("", "gvfio")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	const profile = "h100x2"
	r := &chaosRig{t: t, root: root, node: chaosNode{Profile: profile, Passthrough: true}}
	t.Cleanup(r.kill)
	sim, err := simulate.New(mustProfile(t, profile), testNode, filepath.Join(root, "state", "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetSysfsDelay(15 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	interrupted := 0
	seen := map[string]int{}
	for round := range rounds {
		claims := []*resourceapi.ResourceClaim{chaosClaim("vm", []string{"gpu-1-vfio"}, ""), chaosClaim("whole", []string{"gpu-0"}, "")}
		r.node.Claims = claims
		r.start()
		if r.killWithin(rng, 250*time.Millisecond, func() { _, _ = r.prepare(claims) }) {
			interrupted++
		}
		d, _ := vfioState(t, root, 1)
		seen["after a kill in prepare: "+cmpOr(d, "no driver")]++
		r.start()
		requireBoundAsRecorded(t, root, 1, "start after a kill in prepare")
		resp, err := r.prepare(claims)
		if err != nil {
			t.Fatalf("round %d: prepare: %v", round, err)
		}
		for _, c := range claims {
			if e := resp[string(c.UID)].GetError(); e != "" {
				t.Fatalf("round %d: claim %s: %s", round, c.Name, e)
			}
		}
		requireBoundAsRecorded(t, root, 1, "prepared")
		if round%2 == 1 {
			// A reboot under the prepared claim: the node comes up with the
			// GPU on nvidia, and start binds it to vfio-pci again.
			r.kill()
			rebooted, err := simulate.New(mustProfile(t, profile), testNode, filepath.Join(root, "state", "simulated"))
			if err != nil {
				t.Fatal(err)
			}
			if err := rebooted.Reboot(); err != nil {
				t.Fatal(err)
			}
			if d, _ := vfioState(t, root, 1); d != vfio.DriverNvidia {
				t.Fatalf("round %d: after the reboot GPU 1 is on %q", round, d)
			}
			r.start()
			if requireBoundAsRecorded(t, root, 1, "start after a reboot") != vfio.DriverVFIO {
				t.Fatalf("round %d: prepared claim not restored after the reboot", round)
			}
		}
		if r.killWithin(rng, 80*time.Millisecond, func() { _, _ = r.unprepare(claims) }) {
			interrupted++
		}
		d, _ = vfioState(t, root, 1)
		seen["after a kill in unprepare: "+cmpOr(d, "no driver")]++
		r.start()
		requireBoundAsRecorded(t, root, 1, "start after a kill in unprepare")
		if _, err := r.unprepare(claims); err != nil {
			t.Fatalf("round %d: unprepare: %v", round, err)
		}
		r.kill()
		requireNothingLeft(t, root, profile, round)
		if d, node := vfioState(t, root, 1); d != vfio.DriverNvidia || node {
			t.Fatalf("round %d: after unprepare GPU 1 on %q, group node %v", round, d, node)
		}
	}
	t.Logf("%d rounds, %d kills in flight; bindings found right after a kill: %v; every start ended bound as the record says", rounds, interrupted, seen)
}

func mustProfile(t *testing.T, name string) simulate.Profile {
	t.Helper()
	p, err := simulate.ParseProfile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// killWithin is killDuring with kills spread over max: a passthrough call
// spends most of its time in sysfs writes after the record is written.
func (r *chaosRig) killWithin(rng *rand.Rand, max time.Duration, op func()) (interrupted bool) {
	var wg sync.WaitGroup
	var done atomic.Bool
	wg.Go(func() { op(); done.Store(true) })
	time.Sleep(time.Duration(rng.Int64N(int64(max))))
	interrupted = !done.Load()
	r.kill()
	wg.Wait()
	return interrupted
}
