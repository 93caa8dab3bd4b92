// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NoInstance is the GPU/compute instance ID NVML reports for an event that
// concerns the whole GPU (nvml.GPU_INSTANCE_ID_ANY).
const NoInstance = nvml.GPU_INSTANCE_ID_ANY

// Reasons are what a fault is called in taints (the taint value), logs and
// metrics. An XID fault is "xid-<n>".
const (
	ReasonDoubleBitECC = "ecc-dbe"
	ReasonGPULost      = "gpu-lost"
	// ReasonRecoveryPending: NVML asks for a recovery action (a reset, say)
	// the plugin saw no event for, because it happened before it started.
	ReasonRecoveryPending = "recovery-pending"
)

// XIDReason is the reason of an XID fault.
func XIDReason(xid uint64) string { return fmt.Sprintf("xid-%d", xid) }

// Fault is one thing wrong with a GPU or one of its MIG instances.
type Fault struct {
	Reason  string
	Message string
	Since   time.Time
	// GI and CI name the MIG instance the fault concerns; NoInstance for
	// the whole GPU.
	GI, CI uint32
	// lost faults clear when NVML answers again; event faults when NVML
	// reports no pending recovery action.
	lost bool
}

func (f Fault) wholeGPU() bool { return f.GI == NoInstance || f.CI == NoInstance }

// Status is a device's health and, when unhealthy, why.
type Status struct {
	Healthy bool
	// Reason and Message of the first fault (oldest first); empty when healthy.
	Reason  string
	Message string
	// Since is when the device last changed between healthy and unhealthy
	// (or when it was first seen).
	Since time.Time
}

// faults is the fault state of the node's GPUs, keyed by GPU UUID, and the
// derived status of every published device.
type faults struct {
	mu       sync.Mutex
	byGPU    map[string][]Fault
	statuses map[string]Status // by device name
	subs     map[chan struct{}]bool
}

func newFaults() *faults {
	return &faults{byGPU: map[string][]Fault{}, statuses: map[string]Status{}, subs: map[chan struct{}]bool{}}
}

// add records a fault unless the same one (reason and instance) is
// already there; it reports whether anything changed.
func (s *faults) add(uuid string, f Fault) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.byGPU[uuid] {
		if have.Reason == f.Reason && have.GI == f.GI && have.CI == f.CI {
			return false
		}
	}
	s.byGPU[uuid] = append(s.byGPU[uuid], f)
	return true
}

// clear removes the faults of a GPU that match keep==false.
func (s *faults) clear(uuid string, drop func(Fault) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var kept []Fault
	for _, f := range s.byGPU[uuid] {
		if !drop(f) {
			kept = append(kept, f)
		}
	}
	changed := len(kept) != len(s.byGPU[uuid])
	if len(kept) == 0 {
		delete(s.byGPU, uuid)
	} else {
		s.byGPU[uuid] = kept
	}
	return changed
}

func (s *faults) of(uuid string) []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Fault(nil), s.byGPU[uuid]...)
}

// recompute derives every device's status from the faults and notifies
// subscribers when one changed.
func (s *faults) recompute(devices []Device, instanceOf func(Device) (gi, ci uint32, ok bool), now time.Time) {
	s.mu.Lock()
	changed := false
	for _, d := range devices {
		gi, ci, isInstance := instanceOf(d)
		var applies []Fault
		for _, f := range s.byGPU[d.UUID] {
			switch {
			case f.wholeGPU(), !d.MIG:
				// A fault of the whole GPU affects all its MIG devices; a
				// fault of one instance also affects the whole-GPU device,
				// which overlaps it.
				applies = append(applies, f)
			case isInstance && f.GI == gi && f.CI == ci:
				applies = append(applies, f)
			}
		}
		sort.SliceStable(applies, func(i, j int) bool { return applies[i].Since.Before(applies[j].Since) })
		next := Status{Healthy: len(applies) == 0}
		if !next.Healthy {
			next.Reason, next.Message = applies[0].Reason, applies[0].Message
		}
		prev, seen := s.statuses[d.DeviceName]
		switch {
		case !seen:
			next.Since = now
		case prev.Healthy == next.Healthy:
			next.Since = prev.Since
		default:
			next.Since = now
		}
		if !seen || prev != next {
			s.statuses[d.DeviceName] = next
			changed = true
		}
	}
	var subs []chan struct{}
	if changed {
		for c := range s.subs {
			subs = append(subs, c)
		}
	}
	s.mu.Unlock()
	for _, c := range subs {
		select {
		case c <- struct{}{}:
		default: // a wake-up is pending already; the reader takes the newest state
		}
	}
}

func (s *faults) status(device string) (Status, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.statuses[device]
	return st, ok
}

func (s *faults) subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[c] = true
	s.mu.Unlock()
	return c, func() {
		s.mu.Lock()
		delete(s.subs, c)
		s.mu.Unlock()
	}
}
