// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package testwait

import "testing"

func TestReceiveReturnsTheValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Receive(t, ch, "seven"); got != 7 {
		t.Fatalf("Receive = %d, want 7", got)
	}
}
