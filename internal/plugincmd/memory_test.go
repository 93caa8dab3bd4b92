// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestReleaseMemoryOnlyWhenIdle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls, releases atomic.Uint64
	busy := atomic.Bool{}
	busy.Store(true)
	activity := func() uint64 {
		if busy.Load() {
			return calls.Add(1) // a prepare call between every two ticks
		}
		return calls.Load()
	}
	go releaseMemoryWhenIdle(ctx, 5*time.Millisecond, activity, func() { releases.Add(1) })

	time.Sleep(60 * time.Millisecond)
	if n := releases.Load(); n != 0 {
		t.Fatalf("released memory %d times while the kubelet was preparing claims", n)
	}
	busy.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for releases.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("released %d times after going idle, want repeated releases", releases.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
