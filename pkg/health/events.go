// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// watchedEvents are the NVML events that make a device unhealthy. Single-bit
// ECC errors are corrected by the hardware and are not among them (a high
// rate of them arrives as XID 92).
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError | nvml.EventTypeGpuUnavailableError

// waitTimeout bounds one nvmlEventSetWait, so that a cancelled context is
// noticed within it.
const waitTimeout = 1000 // ms

// watchEvents registers every GPU in one event set and turns its events
// into faults until ctx ends.
func (m *Monitor) watchEvents(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if m.Lib == nil {
		m.watching.Store(true) // nothing to wait for
		return
	}
	set, ret := m.Lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		logger.Info("NVML event sets are unavailable; GPU health is polled only (XIDs and ECC errors go unseen)", "err", nvml.ErrorString(ret))
		m.watching.Store(true)
		return
	}
	// Freed unless NVML was shut down under it: after nvmlShutdown a real
	// driver has released the set, and freeing it again crashes the
	// process (seen on an H100 with driver 580.159.04 by make gpu-smoke).
	shutDown := false
	defer func() {
		if !shutDown {
			_ = set.Free()
		}
	}()
	registered := 0
	for _, g := range m.gpus() {
		if g.dev == nil {
			logger.Info("GPU is passed through to a VM; its events go unseen until the plugin restarts with it back", "gpu", g.uuid)
			continue
		}
		supported, ret := g.dev.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			logger.Info("Cannot read the GPU's supported NVML events; its XIDs go unseen", "gpu", g.uuid, "err", nvml.ErrorString(ret))
			continue
		}
		mask := uint64(watchedEvents) & supported
		if mask == 0 {
			logger.Info("GPU reports none of the health events", "gpu", g.uuid)
			continue
		}
		if ret := g.dev.RegisterEvents(mask, set); ret != nvml.SUCCESS {
			logger.Info("Registering for the GPU's health events failed; its XIDs go unseen", "gpu", g.uuid, "err", nvml.ErrorString(ret))
			continue
		}
		registered++
	}
	logger.Info("Watching NVML health events", "gpus", registered, "ignoredXIDs", m.Ignored.Sorted())
	m.watching.Store(true)
	for ctx.Err() == nil {
		e, ret := set.Wait(waitTimeout)
		switch ret {
		case nvml.SUCCESS:
			m.handle(ctx, e)
		case nvml.ERROR_TIMEOUT:
		case nvml.ERROR_UNINITIALIZED:
			shutDown = true
			return
		default:
			logger.Info("Waiting for NVML events failed; retrying", "err", nvml.ErrorString(ret))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// handle turns one event into a fault of its GPU (or of one MIG instance
// when NVML names it).
func (m *Monitor) handle(ctx context.Context, e nvml.EventData) {
	logger := klog.FromContext(ctx)
	uuid := m.uuidOf(e.Device)
	if uuid == "" {
		logger.Info("NVML event from a GPU this node does not publish; ignored", "type", e.EventType, "data", e.EventData)
		return
	}
	f := Fault{Since: m.now(), GI: e.GpuInstanceId, CI: e.ComputeInstanceId}
	switch {
	case e.EventType&nvml.EventTypeXidCriticalError != 0:
		xid := e.EventData
		ignored := m.Ignored[xid]
		if m.OnXID != nil {
			m.OnXID(uuid, xid, ignored)
		}
		if ignored {
			logger.Info("Application XID; the GPU stays healthy", "gpu", uuid, "xid", xid, "meaning", XIDMeaning(xid))
			return
		}
		f.Reason, f.Message = XIDReason(xid), fmt.Sprintf("XID %d: %s", xid, XIDMeaning(xid))
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		f.Reason, f.Message = ReasonDoubleBitECC, "double-bit ECC error: uncorrectable memory error"
	case e.EventType&nvml.EventTypeGpuUnavailableError != 0:
		f.Reason, f.Message = ReasonGPULost, "GPU unavailable: it no longer answers; drain the node and reset or replace the GPU"
	default:
		return
	}
	if f.wholeGPU() {
		f.GI, f.CI = NoInstance, NoInstance
	}
	logger.Info("GPU fault", "gpu", uuid, "reason", f.Reason, "message", f.Message, "gpuInstance", instanceID(f.GI), "computeInstance", instanceID(f.CI))
	added := m.state.add(uuid, f)
	// The event explains a recovery action the poll may have seen first.
	explained := m.state.clear(uuid, func(f Fault) bool { return f.Reason == ReasonRecoveryPending })
	if added || explained {
		m.recompute()
	}
}

func instanceID(id uint32) string {
	if id == NoInstance {
		return "all"
	}
	return fmt.Sprint(id)
}

func (m *Monitor) uuidOf(dev nvml.Device) string {
	for _, d := range m.Devices {
		if d.NVML == dev {
			return d.UUID
		}
	}
	if dev == nil {
		return ""
	}
	uuid, ret := dev.GetUUID()
	if ret != nvml.SUCCESS {
		return ""
	}
	for _, d := range m.Devices {
		if d.UUID == uuid {
			return uuid
		}
	}
	return ""
}
