// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// NVML event sets, as nvmlEventSetCreate, nvmlDeviceRegisterEvents and
// nvmlEventSetWait provide them: a set receives the events of the types each
// device registered for, Wait returns the next one or ERROR_TIMEOUT. Events
// are injected with InjectEvent (XID and ECC errors are what real GPUs
// report this way).

// SupportedEventTypes are the events a simulated GPU reports, as
// nvmlDeviceGetSupportedEventTypes answers on data-center GPUs.
const SupportedEventTypes = nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError |
	nvml.EventTypePState | nvml.EventTypeXidCriticalError | nvml.EventTypeClock | nvml.EventTypePowerSourceChange

// Common XIDs (NVIDIA's XID catalogue): 48 a double-bit ECC error, 79 the
// GPU fell off the bus, 94/95 contained/uncontained ECC errors.
const (
	XidDoubleBitECC    = 48
	XidFallenOffTheBus = 79
	XidContainedECC    = 94
	XidUncontainedECC  = 95
)

type eventSet struct {
	*mock.EventSet
	hub    *eventHub
	mu     sync.Mutex
	masks  map[nvml.Device]uint64
	queue  []nvml.EventData
	wake   chan struct{}
	closed bool
}

type eventHub struct {
	mu   sync.Mutex
	sets map[*eventSet]bool
}

func (s *Simulator) wireEvents() {
	s.events = &eventHub{sets: map[*eventSet]bool{}}
	s.wireXIDFaults()
	s.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set := s.events.newSet()
		s.watchXIDFiles() // <uuid>.xid fault files (xid_faults.go)
		return set, nvml.SUCCESS
	}
	s.EventSetWaitFunc = func(set nvml.EventSet, timeoutms uint32) (nvml.EventData, nvml.Return) {
		return set.Wait(timeoutms)
	}
	s.EventSetFreeFunc = func(set nvml.EventSet) nvml.Return { return set.Free() }
	s.DeviceRegisterEventsFunc = func(dev nvml.Device, types uint64, set nvml.EventSet) nvml.Return {
		return dev.RegisterEvents(types, set)
	}
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
			if r := s.fault(dev.UUID); r != nvml.SUCCESS {
				return 0, r
			}
			return SupportedEventTypes, nvml.SUCCESS
		}
		dev.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
			if r := s.fault(dev.UUID); r != nvml.SUCCESS {
				return r
			}
			es, ok := set.(*eventSet)
			if !ok || types&^SupportedEventTypes != 0 {
				return nvml.ERROR_NOT_SUPPORTED
			}
			es.mu.Lock()
			defer es.mu.Unlock()
			if es.closed {
				return nvml.ERROR_UNINITIALIZED
			}
			es.masks[dev] |= types
			return nvml.SUCCESS
		}
	}
}

func (h *eventHub) newSet() *eventSet {
	es := &eventSet{EventSet: &mock.EventSet{}, hub: h, masks: map[nvml.Device]uint64{}, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.sets[es] = true
	h.mu.Unlock()
	return es
}

// Free releases the set; a Wait in progress returns ERROR_UNINITIALIZED.
// (Wait and Free are methods rather than mock funcs: the mock would record
// every call, and a health monitor waits forever.)
func (es *eventSet) Free() nvml.Return {
	es.mu.Lock()
	es.closed = true
	es.mu.Unlock()
	select {
	case es.wake <- struct{}{}:
	default:
	}
	es.hub.mu.Lock()
	delete(es.hub.sets, es)
	es.hub.mu.Unlock()
	return nvml.SUCCESS
}

// Wait returns the next event, or ERROR_TIMEOUT after timeoutms.
func (es *eventSet) Wait(timeoutms uint32) (nvml.EventData, nvml.Return) {
	deadline := time.Now().Add(time.Duration(timeoutms) * time.Millisecond)
	for {
		es.mu.Lock()
		if es.closed {
			es.mu.Unlock()
			return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
		}
		if len(es.queue) > 0 {
			e := es.queue[0]
			es.queue = es.queue[1:]
			es.mu.Unlock()
			return e, nvml.SUCCESS
		}
		es.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		t := time.NewTimer(left)
		select {
		case <-es.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// InjectEvent delivers an event of eventType (nvml.EventType*) with data
// (the XID for XID events) on the GPU with the given UUID to every event set
// that registered for it; giID and ciID name the MIG instance it concerns
// (0xFFFFFFFF for the whole GPU, as NVML reports). It reports how many sets
// received it.
func (s *Simulator) InjectEvent(uuid string, eventType, data uint64, giID, ciID uint32) int {
	var dev nvml.Device
	for _, d := range s.Devices {
		if d.(*server.Device).UUID == uuid {
			dev = d
		}
	}
	if dev == nil {
		return 0
	}
	s.notePending(uuid, eventType, data)
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	n := 0
	for es := range s.events.sets {
		es.mu.Lock()
		if es.masks[dev]&eventType != 0 && !es.closed {
			es.queue = append(es.queue, nvml.EventData{Device: dev, EventType: eventType, EventData: data, GpuInstanceId: giID, ComputeInstanceId: ciID})
			n++
			select {
			case es.wake <- struct{}{}:
			default:
			}
		}
		es.mu.Unlock()
	}
	return n
}

// InjectXid delivers an XID critical error for a whole GPU.
func (s *Simulator) InjectXid(uuid string, xid uint64) int {
	return s.InjectEvent(uuid, nvml.EventTypeXidCriticalError, xid, NoInstance, NoInstance)
}

// NoInstance is the GPU/compute instance ID of an event that concerns the
// whole GPU.
const NoInstance = 0xFFFFFFFF
