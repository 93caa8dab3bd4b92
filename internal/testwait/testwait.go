// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testwait holds the tests' wait for a value on a channel, which
// fails the test instead of hanging it when the value never comes (a lock
// never released, a goroutine that never ends).
package testwait

import (
	"testing"
	"time"
)

// Timeout is long enough for a loaded CI machine under -race.
const Timeout = 30 * time.Second

// Receive waits up to Timeout for a value on ch.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Timeout):
		t.Fatalf("timed out after %v waiting for %s", Timeout, what)
	}
	var zero T
	return zero
}
