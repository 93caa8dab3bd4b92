// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devicestatus

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// TestWritesWaitForTheKubeletsCalls: while a kubelet call is in flight no
// status is written; once none has been for Quiet, it is.
func TestWritesWaitForTheKubeletsCalls(t *testing.T) {
	client, api := newAPIServer(t, nil)
	gate := NewGate()
	w := start(t, client, Options{Gate: gate, Quiet: 20 * time.Millisecond, MaxDefer: time.Minute})
	leave := gate.Enter() // the prepare call that queues the status
	w.Prepared(claim("a"), devices("GPU-1"))
	time.Sleep(100 * time.Millisecond)
	if got := api.get(); len(got) != 0 {
		t.Fatalf("written while the call was in flight: %v", got)
	}
	ended := time.Now()
	leave()
	api.waitFor(t, 1)
	if d := time.Since(ended); d < 20*time.Millisecond {
		t.Errorf("written %v after the call ended, before the quiet period", d)
	}
	if st := w.Stats(); st.Written != 1 || st.Deferred != 1 {
		t.Errorf("stats %+v, want 1 written, 1 deferred", st)
	}
}

// TestMaxDeferBoundsTheWait: under calls that never stop, a status is
// written MaxDefer after it was queued, not never.
func TestMaxDeferBoundsTheWait(t *testing.T) {
	client, api := newAPIServer(t, nil)
	gate := NewGate()
	defer gate.Enter()() // in flight for the whole test
	w := start(t, client, Options{Gate: gate, Quiet: 10 * time.Millisecond, MaxDefer: 150 * time.Millisecond})
	queued := time.Now()
	w.Prepared(claim("a"), devices("GPU-1"))
	api.waitFor(t, 1)
	if d := time.Since(queued); d < 150*time.Millisecond {
		t.Errorf("written %v after it was queued, before MaxDefer", d)
	}
}

// TestUpdatesKeepTheirDeadline: a claim updated again and again while the
// calls go on is not deferred past MaxDefer from its first update, and
// only its newest update is written.
func TestUpdatesKeepTheirDeadline(t *testing.T) {
	client, api := newAPIServer(t, nil)
	gate := NewGate()
	defer gate.Enter()()
	w := start(t, client, Options{Gate: gate, Quiet: 10 * time.Millisecond, MaxDefer: 200 * time.Millisecond})
	first := time.Now()
	for i := 1; time.Since(first) < 150*time.Millisecond; i++ {
		w.Prepared(claim("a"), devices(fmt.Sprintf("GPU-%d", i)))
		time.Sleep(10 * time.Millisecond)
	}
	last := "GPU-newest"
	w.Prepared(claim("a"), devices(last))
	writes := api.waitFor(t, 1)
	if d := time.Since(first); d > 2*time.Second {
		t.Errorf("first write %v after the first update", d)
	}
	if got := writes[0].uuids[0]; got != last {
		t.Errorf("wrote %s, want the newest %s", got, last)
	}
}

// TestUnpreparedWhileDeferredIsSkipped: a claim unprepared while its write
// waited for the calls to end is not written (the resourceclaim controller
// clears device status with the allocation), and is counted as skipped.
func TestUnpreparedWhileDeferredIsSkipped(t *testing.T) {
	client, api := newAPIServer(t, nil)
	gate := NewGate()
	recs := &records{prepared: map[types.UID]bool{"uid-gone": true, "uid-kept": true}}
	w := start(t, client, Options{Records: recs, Gate: gate, Quiet: 10 * time.Millisecond, MaxDefer: time.Minute})
	leave := gate.Enter()
	w.Prepared(claim("gone"), devices("GPU-0"))
	w.Prepared(claim("kept"), devices("GPU-1"))
	time.Sleep(30 * time.Millisecond)
	recs.mu.Lock()
	delete(recs.prepared, "uid-gone") // the unprepare the kubelet called
	recs.mu.Unlock()
	leave()
	api.waitFor(t, 1)
	time.Sleep(50 * time.Millisecond)
	if got, want := fmt.Sprint(api.get()), fmt.Sprint([]write{{"kept", []string{"GPU-1"}, []string{""}, nil}}); got != want {
		t.Fatalf("writes %s, want %s", got, want)
	}
	if st := w.Stats(); st.Skipped != 1 || st.Written != 1 {
		t.Errorf("stats %+v, want 1 skipped, 1 written", st)
	}
}

// TestRetriedUntilWritten: without a bound on the retries, a status is
// written however often the API server fails first, and the retries stop
// once the claim is unprepared.
func TestRetriedUntilWritten(t *testing.T) {
	n := 0
	client, api := newAPIServer(t, func(w write) error {
		if w.claim == "a" {
			n++ // one claim: never concurrent
			if n <= 20 {
				return apierrors.NewServiceUnavailable("busy")
			}
		}
		if w.claim == "b" {
			return apierrors.NewServiceUnavailable("busy")
		}
		return nil
	})
	recs := &records{prepared: map[types.UID]bool{"uid-a": true, "uid-b": true}}
	w := start(t, client, Options{Records: recs, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond})
	w.Prepared(claim("a"), devices("GPU-0"))
	w.Prepared(claim("b"), devices("GPU-1"))
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Written == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a not written after %d attempts", n)
		}
		time.Sleep(time.Millisecond)
	}
	recs.mu.Lock()
	delete(recs.prepared, "uid-b")
	recs.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	before := len(api.get())
	time.Sleep(100 * time.Millisecond)
	if after := len(api.get()); after != before {
		t.Errorf("b retried after its unprepare: %d more writes", after-before)
	}
	if st := w.Stats(); st.Failed != 0 {
		t.Errorf("stats %+v: a transient error was given up on", st)
	}
}
