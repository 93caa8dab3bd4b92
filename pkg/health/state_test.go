// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"testing"
	"time"
)

// The state machine of state.go, driven directly: faults per GPU, the
// statuses derived from them, and the subscribers woken on change.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// stateDevices are one whole GPU "g" with two static MIG devices (1/0 and
// 2/0) and a dynamic one whose instance does not exist yet.
func stateDevices() []Device {
	return []Device{
		{DeviceName: "gpu", UUID: "g"},
		{DeviceName: "mig-a", UUID: "g", MIG: true, Instance: &[2]uint32{1, 0}},
		{DeviceName: "mig-b", UUID: "g", MIG: true, Instance: &[2]uint32{2, 0}},
		{DeviceName: "mig-dyn", UUID: "g", MIG: true},
		{DeviceName: "other", UUID: "h"},
	}
}

func staticInstance(d Device) (uint32, uint32, bool) {
	if d.Instance == nil {
		return 0, 0, false
	}
	return d.Instance[0], d.Instance[1], true
}

func mustStatus(t *testing.T, s *faults, device string) Status {
	t.Helper()
	st, ok := s.status(device)
	if !ok {
		t.Fatalf("no status for %s", device)
	}
	return st
}

func TestFaultsAddIsIdempotentPerReasonAndInstance(t *testing.T) {
	s := newFaults()
	f := Fault{Reason: "xid-94", GI: 1, CI: 0, Since: t0}
	if !s.add("g", f) {
		t.Fatal("first fault not added")
	}
	f.Since = t0.Add(time.Minute)
	f.Message = "again"
	if s.add("g", f) {
		t.Error("the same reason on the same instance was added twice")
	}
	if !s.add("g", Fault{Reason: "xid-94", GI: 2, CI: 0}) {
		t.Error("the same reason on another instance was not added")
	}
	if !s.add("g", Fault{Reason: "xid-95", GI: 1, CI: 0}) {
		t.Error("another reason on the same instance was not added")
	}
	if !s.add("h", Fault{Reason: "xid-94", GI: 1, CI: 0}) {
		t.Error("the same fault on another GPU was not added")
	}
	got := s.of("g")
	if len(got) != 3 || got[0].Since != t0 || got[0].Message != "" {
		t.Errorf("faults of g = %+v, want 3 with the first one kept as it was", got)
	}
}

func TestFaultsClearReportsChangesAndForgetsEmptyGPUs(t *testing.T) {
	s := newFaults()
	s.add("g", Fault{Reason: "a", lost: true})
	s.add("g", Fault{Reason: "b"})
	if s.clear("g", func(f Fault) bool { return f.Reason == "none" }) {
		t.Error("clear that dropped nothing reported a change")
	}
	if !s.clear("g", func(f Fault) bool { return f.lost }) {
		t.Error("clear that dropped a fault reported no change")
	}
	if got := s.of("g"); len(got) != 1 || got[0].Reason != "b" {
		t.Errorf("after dropping the lost fault: %+v", got)
	}
	if !s.clear("g", func(Fault) bool { return true }) {
		t.Error("clearing the last fault reported no change")
	}
	if _, ok := s.byGPU["g"]; ok {
		t.Error("a GPU without faults keeps an entry")
	}
	if s.clear("unknown", func(Fault) bool { return true }) {
		t.Error("clearing an unknown GPU reported a change")
	}
}

func TestFaultsOfReturnsACopy(t *testing.T) {
	s := newFaults()
	s.add("g", Fault{Reason: "xid-79"})
	got := s.of("g")
	got[0].Reason = "changed"
	if s.of("g")[0].Reason != "xid-79" {
		t.Error("changing the returned faults changed the state")
	}
}

func TestRecomputeAttributesFaultsToDevices(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault Fault
		// want lists the unhealthy devices.
		want map[string]bool
	}{
		{"whole GPU", Fault{Reason: "xid-79", GI: NoInstance, CI: NoInstance}, map[string]bool{"gpu": true, "mig-a": true, "mig-b": true, "mig-dyn": true}},
		{"instance 2/0", Fault{Reason: "xid-94", GI: 2, CI: 0}, map[string]bool{"gpu": true, "mig-b": true}},
		{"instance 1/0", Fault{Reason: "xid-94", GI: 1, CI: 0}, map[string]bool{"gpu": true, "mig-a": true}},
		// A compute instance of a GPU instance no device is: only the
		// whole GPU overlaps it.
		{"instance 1/1", Fault{Reason: "xid-94", GI: 1, CI: 1}, map[string]bool{"gpu": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFaults()
			s.add("g", tc.fault)
			s.recompute(stateDevices(), staticInstance, t0)
			for _, d := range stateDevices() {
				st := mustStatus(t, s, d.DeviceName)
				if st.Healthy == tc.want[d.DeviceName] {
					t.Errorf("%s healthy = %v, want %v", d.DeviceName, st.Healthy, !tc.want[d.DeviceName])
				}
				if !st.Healthy && st.Reason != tc.fault.Reason {
					t.Errorf("%s reason = %q, want %q", d.DeviceName, st.Reason, tc.fault.Reason)
				}
			}
		})
	}
}

func TestStatusNamesTheOldestFault(t *testing.T) {
	s := newFaults()
	// Added newest first: the status must still name the oldest.
	s.add("g", Fault{Reason: "xid-95", Message: "newer", Since: t0.Add(time.Second), GI: NoInstance, CI: NoInstance})
	s.add("g", Fault{Reason: "ecc-dbe", Message: "older", Since: t0, GI: NoInstance, CI: NoInstance})
	s.recompute(stateDevices(), staticInstance, t0)
	if st := mustStatus(t, s, "gpu"); st.Reason != "ecc-dbe" || st.Message != "older" {
		t.Errorf("status %+v, want the oldest fault (ecc-dbe)", st)
	}
}

func TestStatusSinceIsTheLastHealthChange(t *testing.T) {
	s := newFaults()
	devs := stateDevices()[:1]
	s.recompute(devs, staticInstance, t0)
	if st := mustStatus(t, s, "gpu"); !st.Healthy || !st.Since.Equal(t0) {
		t.Fatalf("first status %+v, want healthy since first seen", st)
	}
	// Recomputed later without a change: Since stays.
	s.recompute(devs, staticInstance, t0.Add(time.Minute))
	if st := mustStatus(t, s, "gpu"); !st.Since.Equal(t0) {
		t.Errorf("unchanged status moved its Since to %v", st.Since)
	}
	t1 := t0.Add(2 * time.Minute)
	s.add("g", Fault{Reason: "xid-79", Since: t1, GI: NoInstance, CI: NoInstance})
	s.recompute(devs, staticInstance, t1)
	if st := mustStatus(t, s, "gpu"); st.Healthy || !st.Since.Equal(t1) {
		t.Errorf("after a fault: %+v, want unhealthy since %v", st, t1)
	}
	// Another reason while still unhealthy: the reason changes, Since not.
	t2 := t1.Add(time.Minute)
	s.clear("g", func(Fault) bool { return true })
	s.add("g", Fault{Reason: "ecc-dbe", Since: t2, GI: NoInstance, CI: NoInstance})
	s.recompute(devs, staticInstance, t2)
	if st := mustStatus(t, s, "gpu"); st.Reason != "ecc-dbe" || !st.Since.Equal(t1) {
		t.Errorf("another fault while unhealthy: %+v, want ecc-dbe since %v", st, t1)
	}
	t3 := t2.Add(time.Minute)
	s.clear("g", func(Fault) bool { return true })
	s.recompute(devs, staticInstance, t3)
	if st := mustStatus(t, s, "gpu"); !st.Healthy || !st.Since.Equal(t3) || st.Reason != "" || st.Message != "" {
		t.Errorf("after recovery: %+v, want healthy since %v without a reason", st, t3)
	}
}

// recv waits for a wake-up, failing after a timeout.
func recv(t *testing.T, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up")
	}
}

func noRecv(t *testing.T, c <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("woken, but %s", why)
	default:
	}
}

func TestSubscribersAreWokenOnlyOnChange(t *testing.T) {
	s := newFaults()
	devs := stateDevices()
	c, stop := s.subscribe()
	s.recompute(devs, staticInstance, t0)
	recv(t, c) // first statuses
	s.recompute(devs, staticInstance, t0.Add(time.Second))
	noRecv(t, c, "nothing changed")

	// A fault of a GPU instance no device is changes only "gpu".
	s.add("g", Fault{Reason: "xid-94", GI: 1, CI: 1})
	s.recompute(devs, staticInstance, t0)
	recv(t, c)

	// Two changes before the reader wakes: one wake-up, and recompute
	// does not block on the full channel.
	s.add("h", Fault{Reason: "xid-79", GI: NoInstance, CI: NoInstance})
	s.recompute(devs, staticInstance, t0)
	s.clear("h", func(Fault) bool { return true })
	s.recompute(devs, staticInstance, t0)
	recv(t, c)
	noRecv(t, c, "two changes queued two wake-ups")

	other, stopOther := s.subscribe()
	defer stopOther()
	stop()
	s.add("h", Fault{Reason: "xid-79", GI: NoInstance, CI: NoInstance})
	s.recompute(devs, staticInstance, t0)
	recv(t, other)
	noRecv(t, c, "the subscription had ended")
}
