// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// TestKeyedLocksExcludeAndNeverDeadlock: goroutines lock overlapping key
// sets given in random orders (as claims list their devices in any order).
// No two ever hold one key together, none deadlocks, and no lock outlives
// its last user.
func TestKeyedLocksExcludeAndNeverDeadlock(t *testing.T) {
	k := newKeyedLocks()
	keys := []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e"}
	holders := make(map[string]*atomic.Int32, len(keys))
	for _, key := range keys {
		holders[key] = &atomic.Int32{}
	}
	var violations atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				set := make([]string, 1+r.IntN(len(keys)))
				for i := range set {
					set[i] = keys[r.IntN(len(keys))] // duplicates included
				}
				unlock := k.Lock(set...)
				for _, key := range set {
					if holders[key].Add(1) != 1 {
						violations.Add(1)
					}
					holders[key].Add(-1)
				}
				unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("lockers still running after 30s: deadlock")
	}
	if v := violations.Load(); v != 0 {
		t.Fatalf("%d times a key was held twice", v)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.locks) != 0 {
		t.Fatalf("%d locks left after every user unlocked", len(k.locks))
	}
}

// TestKeyedLocksBlockOnlyTheirKeys: a held key blocks a second locker of
// it, a disjoint key set does not wait, and unlocking lets the waiter in.
func TestKeyedLocksBlockOnlyTheirKeys(t *testing.T) {
	k := newKeyedLocks()
	unlockAB := k.Lock("b", "a", "b")
	got := make(chan func(), 1)
	go func() { got <- k.Lock("c", "a") }()
	free := make(chan func(), 1)
	go func() { free <- k.Lock("d") }()
	select {
	case unlock := <-free:
		unlock()
	case <-time.After(5 * time.Second):
		t.Fatal("a disjoint key waited for another locker")
	}
	select {
	case <-got:
		t.Fatal("key a was handed out twice")
	case <-time.After(50 * time.Millisecond):
	}
	unlockAB()
	select {
	case unlock := <-got:
		unlock()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never got key a after it was unlocked")
	}
}

// TestKeyedLocksTakeKeysInSortedOrder: a locker waiting for key a has not
// taken key b yet, although it named b first. Taking keys in the order
// given would let two claims each hold one GPU and wait for the other's.
func TestKeyedLocksTakeKeysInSortedOrder(t *testing.T) {
	k := newKeyedLocks()
	unlockA := k.Lock("a")
	waiter := make(chan func(), 1)
	go func() { waiter <- k.Lock("b", "a") }()
	time.Sleep(50 * time.Millisecond) // let the waiter block; passing early proves nothing, failing cannot be early
	gotB := make(chan func(), 1)
	go func() { gotB <- k.Lock("b") }()
	select {
	case unlock := <-gotB:
		unlock()
	case <-time.After(5 * time.Second):
		t.Fatal("key b was taken by a locker still waiting for key a")
	}
	unlockA()
	select {
	case unlock := <-waiter:
		unlock()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter never got its keys")
	}
}

// TestLockKeysAreGPUs: every device of one GPU takes the GPU's lock, so MIG
// changes on a GPU never interleave; devices of other GPUs take theirs.
func TestLockKeysAreGPUs(t *testing.T) {
	g0, g1 := &nvdev.GPU{UUID: "GPU-0"}, &nvdev.GPU{UUID: "GPU-1"}
	planned := []plannedDevice{
		{device: &AllocatableDevice{Name: "mig-a", Kind: configapi.DynamicMIG, GPU: g1, Placement: mig.Placement{Start: 0, Size: 1}}},
		{device: &AllocatableDevice{Name: "gpu-0", Kind: configapi.WholeGPU, GPU: g0}},
		{device: &AllocatableDevice{Name: "mig-b", Kind: configapi.DynamicMIG, GPU: g1, Placement: mig.Placement{Start: 1, Size: 1}}},
	}
	got := lockKeys(planned)
	want := []string{"GPU-1", "GPU-0", "GPU-1"}
	if len(got) != len(want) {
		t.Fatalf("lock keys %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lock keys %v, want %v", got, want)
		}
	}
}

// TestConcurrentClaimsOnOneGPU: claims for disjoint MIG placements of one
// GPU prepare and unprepare concurrently; each gets its own device, none
// fails, and the GPU ends empty and out of MIG mode.
func TestConcurrentClaimsOnOneGPU(t *testing.T) {
	n := newNode(t, "h100x1", true)
	var wg sync.WaitGroup
	errs := make(chan error, 7)
	for start := range uint32(7) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := claim(uidFor(start), dev(n.mig(0, "1g.10gb", start)))
			for range 3 {
				if _, err := n.state.Prepare(t.Context(), c); err != nil {
					errs <- err
					return
				}
				if err := n.state.Unprepare(t.Context(), ref(c)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("concurrent claims still running after 60s")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := n.sim.MigInstanceCount(n.uuid(0)); got != 0 {
		t.Fatalf("%d instances left", got)
	}
	if len(n.store.List()) != 0 {
		t.Fatalf("records left: %+v", n.store.List())
	}
}

func uidFor(i uint32) types.UID { return types.UID("uid-" + string(rune('a'+i))) }

// TryLock never waits: it fails while another holds the key, succeeds
// once it is free, and leaves nothing behind.
func TestTryLock(t *testing.T) {
	k := newKeyedLocks()
	unlock := k.Lock("gpu")
	if _, ok := k.TryLock("gpu"); ok {
		t.Fatal("TryLock took a held key")
	}
	unlock()
	u, ok := k.TryLock("gpu")
	if !ok {
		t.Fatal("TryLock failed on a free key")
	}
	if _, ok := k.TryLock("gpu"); ok {
		t.Fatal("TryLock took a key it holds")
	}
	u()
	if n := len(k.locks); n != 0 {
		t.Fatalf("%d lock entries left", n)
	}
}
