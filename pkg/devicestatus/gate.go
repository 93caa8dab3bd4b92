// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devicestatus

import (
	"sync/atomic"
	"time"
)

// Gate tells the writer when the kubelet's calls are in flight, so that
// status writes wait for a quiet moment instead of competing with them.
//
// Why: a status write costs the node little, but the API server a
// server-side apply and etcd a write. Where the API server shares the
// node's CPUs (a small cluster, prepbench's, the local one), a write
// started when a prepare returns runs exactly while the kubelet calls
// again or starts the container, and the measured prepare and unprepare
// latency at one claim at a time grew by 1-3 ms from it (docs/performance.md).
// The kubelet needs none of it before it starts the container.
//
// The zero value is not usable; NewGate makes one.
type Gate struct {
	inFlight atomic.Int64
	// lastEnd is when the last call ended (UnixNano); zero before any.
	lastEnd atomic.Int64
	now     func() time.Time
}

// NewGate returns a gate with no call in flight.
func NewGate() *Gate { return &Gate{now: time.Now} }

// Enter marks one kubelet call in flight until the returned func runs.
func (g *Gate) Enter() func() {
	g.inFlight.Add(1)
	return func() {
		g.lastEnd.Store(g.now().UnixNano())
		g.inFlight.Add(-1)
	}
}

// untilQuiet is how long, from now, until no call has been in flight for
// quiet: 0 when that is so already, quiet while a call is in flight (it
// may end at any moment; the caller looks again).
func (g *Gate) untilQuiet(quiet time.Duration) time.Duration {
	if g.inFlight.Load() > 0 {
		return quiet
	}
	last := g.lastEnd.Load()
	if last == 0 {
		return 0
	}
	if since := g.now().Sub(time.Unix(0, last)); since < quiet {
		return quiet - since
	}
	return 0
}
