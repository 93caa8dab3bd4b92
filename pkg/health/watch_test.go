// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// watchDone runs watchEvents and fails the test unless it returns by
// itself (the context is never cancelled) within a timeout.
func watchDone(t *testing.T, m *Monitor) {
	t.Helper()
	m.init()
	done := make(chan struct{})
	go func() { m.watchEvents(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watchEvents did not return")
	}
}

func TestNoEventSetMeansPollingOnly(t *testing.T) {
	u := newUnit(nil)
	u.m.Lib = &mock.Interface{EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }}
	watchDone(t, u.m)
	u.expect(t, unitHealthy)
}

// registeringGPU supports the given events and records what it was
// registered for.
func registeringGPU(uuid string, supported uint64, supportedRet nvml.Return) (*fakeGPU, *uint64) {
	g := newFakeGPU(uuid)
	var registered uint64
	g.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return supported, supportedRet }
	g.RegisterEventsFunc = func(types uint64, _ nvml.EventSet) nvml.Return {
		registered |= types
		return nvml.SUCCESS
	}
	return g, &registered
}

func TestEventRegistrationAndTheWaitLoop(t *testing.T) {
	// full supports every health event and more; partial only XIDs and
	// P-state changes; none no health event; broken cannot say.
	full, fullReg := registeringGPU("full", allEvents, nvml.SUCCESS)
	partial, partialReg := registeringGPU("partial", nvml.EventTypeXidCriticalError|nvml.EventTypePState, nvml.SUCCESS)
	none, noneReg := registeringGPU("none", nvml.EventTypePState|nvml.EventTypeSingleBitEccError, nvml.SUCCESS)
	broken, brokenReg := registeringGPU("broken", 0, nvml.ERROR_UNKNOWN)

	var mu sync.Mutex
	waits := 0
	freed := false
	// The set delivers an XID on "partial", fails once, times out, then
	// reports NVML shut down, which ends the loop.
	set := &mock.EventSet{
		WaitFunc: func(timeout uint32) (nvml.EventData, nvml.Return) {
			mu.Lock()
			defer mu.Unlock()
			waits++
			if timeout != waitTimeout {
				t.Errorf("Wait(%d), want %d ms", timeout, waitTimeout)
			}
			switch waits {
			case 1:
				return nvml.EventData{Device: partial, EventType: nvml.EventTypeXidCriticalError, EventData: 74, GpuInstanceId: NoInstance, ComputeInstanceId: NoInstance}, nvml.SUCCESS
			case 2:
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			case 3:
				return nvml.EventData{}, nvml.ERROR_UNKNOWN // retried after a second
			default:
				return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
			}
		},
		FreeFunc: func() nvml.Return {
			mu.Lock()
			defer mu.Unlock()
			freed = true
			return nvml.SUCCESS
		},
	}
	m := New(&mock.Interface{EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }}, []Device{
		{DeviceName: "gpu-full", UUID: "full", NVML: full},
		{DeviceName: "gpu-partial", UUID: "partial", NVML: partial},
		// A MIG device of the same GPU: registered once.
		{DeviceName: "gpu-partial-mig", UUID: "partial", NVML: partial, MIG: true, Instance: &[2]uint32{1, 0}},
		{DeviceName: "gpu-none", UUID: "none", NVML: none},
		{DeviceName: "gpu-broken", UUID: "broken", NVML: broken},
	}, nil)
	watchDone(t, m)

	if *fullReg != uint64(watchedEvents) {
		t.Errorf("full GPU registered for %#x, want the health events %#x only", *fullReg, uint64(watchedEvents))
	}
	if *partialReg != nvml.EventTypeXidCriticalError {
		t.Errorf("partial GPU registered for %#x, want XIDs only", *partialReg)
	}
	if n := len(partial.RegisterEventsCalls()); n != 1 {
		t.Errorf("a GPU with two devices registered %d times", n)
	}
	if *noneReg != 0 || *brokenReg != 0 {
		t.Errorf("GPUs without health events registered: %#x %#x", *noneReg, *brokenReg)
	}
	mu.Lock()
	defer mu.Unlock()
	// NVML was shut down under the set: a real driver has released it
	// already, and freeing it again crashed the plugin on an H100.
	if waits != 4 || freed {
		t.Errorf("%d waits, freed %v: want the loop to end at ERROR_UNINITIALIZED and leave the set alone", waits, freed)
	}
	for dev, want := range map[string]bool{"gpu-full": true, "gpu-partial": false, "gpu-partial-mig": false, "gpu-none": true} {
		if st, _ := m.Status(dev); st.Healthy != want {
			t.Errorf("%s healthy = %v, want %v", dev, st.Healthy, want)
		}
	}
}

// allEvents is every event type NVML defines for a device.
const allEvents = nvml.EventTypeAll
