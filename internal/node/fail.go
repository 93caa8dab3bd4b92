// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"fmt"
	"sync"
)

// Recorder is a schedtest.T for code that is not a test (the allocator in
// `gpudra demo`, `gpudra mig-packing`). Fatalf records the failure and
// unwinds the caller's stack as testing.T's does, so deferred cleanups
// run; the function that deferred Recover returns the failure as its
// error. Fatalf must be called on that function's goroutine.
type Recorder struct {
	mu  sync.Mutex
	err error
}

// failed is what Fatalf panics with; only Recover stops it.
type failed struct{ r *Recorder }

func (*Recorder) Helper() {}

// Fatalf records the failure and does not return.
func (r *Recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.mu.Unlock()
	panic(failed{r})
}

// Err is the first failure recorded, or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Recover, deferred, stops the unwinding a Fatalf of r started and sets
// *err to the failure. Any other panic goes on.
func (r *Recorder) Recover(err *error) {
	v := recover()
	if v == nil {
		return
	}
	if f, ok := v.(failed); ok && f.r == r {
		*err = r.Err()
		return
	}
	panic(v)
}
