// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package health turns NVML's view of the node's GPUs into device health:
// XID critical errors, double-bit ECC errors and GPUs that fell off the bus
// make devices unhealthy; NVML reporting no pending recovery action (after
// a reset, say) makes them healthy again. Consumers subscribe to changes:
// the kubelet's DRA health stream (Watch), and the driver, which taints
// the devices in its ResourceSlices and marks claims' device status.
package health

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Device is one published device to watch.
type Device struct {
	PoolName   string
	DeviceName string
	// UUID and NVML are those of the GPU (the parent of a MIG device):
	// NVML reports events per GPU.
	UUID string
	NVML nvml.Device
	// MIG devices are affected by faults of their own instance (GI, CI);
	// Instance is set where the instance exists at start (static MIG).
	MIG      bool
	Instance *[2]uint32
}

// Monitor watches NVML events and polls for what events cannot tell.
type Monitor struct {
	// Lib creates the event set; nil to poll only.
	Lib     nvml.Interface
	Devices []Device
	Ignored XIDSet
	// Interval between polls: for a GPU that fell off the bus (which sends
	// no event on drivers without GPU-unavailable events) and for the
	// recovery action that tells a fault is over.
	Interval time.Duration
	// Resend re-sends an unchanged report to the kubelet before its 30 s
	// timeout turns the health to Unknown.
	Resend time.Duration
	// InstanceOf names the MIG instance (GI, CI) a device is now, for
	// devices whose instance is created at prepare (dynamic MIG).
	InstanceOf func(device string) (gi, ci uint32, ok bool)
	// OnXID is called for every XID event (ignored ones too).
	OnXID func(uuid string, xid uint64, ignored bool)
	// Passthrough returns the GPUs (by UUID) handed to a VM on purpose (a
	// checkpoint record holds each for vfio-pci, from before the first
	// sysfs write until NVML sees it again): NVML cannot reach them then,
	// which is no fault. Asked once per poll. Nil: none is.
	Passthrough func() map[string]bool

	now   func() time.Time
	state *faults
	once  sync.Once
	// watching and polled make Ready: the event set is registered (or
	// known to be unavailable) and the first poll is done.
	watching, polled atomic.Bool
	// unsupported logs once per GPU that NVML cannot report a recovery action.
	unsupported map[string]bool
	// pendingSeen marks GPUs without faults whose recovery action was
	// pending at the last poll.
	pendingSeen map[string]bool
	// handles are the handles looked up for GPUs published without one.
	handles sync.Map
}

// New returns a monitor with production intervals.
func New(lib nvml.Interface, devices []Device, ignored XIDSet) *Monitor {
	if ignored == nil {
		ignored = IgnoredXIDs(nil)
	}
	return &Monitor{Lib: lib, Devices: devices, Ignored: ignored, Interval: 5 * time.Second, Resend: 10 * time.Second, now: time.Now}
}

func (m *Monitor) init() {
	m.once.Do(func() {
		if m.now == nil {
			m.now = time.Now
		}
		m.state = newFaults()
		m.unsupported = map[string]bool{}
		m.pendingSeen = map[string]bool{}
		m.recompute()
	})
}

// Ready reports whether the monitor sees faults as they happen: its NVML
// event set is registered (or NVML has none to offer) and the first poll
// is done. Until then a fault's event is lost (NVML does not deliver
// events from before registration) and only the slow poll would find the
// pending recovery action, seconds later and without the XID.
func (m *Monitor) Ready() bool { return m.watching.Load() && m.polled.Load() }

// Status is the health of a published device; false when unknown.
func (m *Monitor) Status(device string) (Status, bool) {
	m.init()
	return m.state.status(device)
}

// Faults lists what is wrong with a GPU.
func (m *Monitor) Faults(uuid string) []Fault {
	m.init()
	return m.state.of(uuid)
}

// Subscribe returns a channel woken after device statuses changed, and a
// function that ends the subscription.
func (m *Monitor) Subscribe() (<-chan struct{}, func()) {
	m.init()
	return m.state.subscribe()
}

func (m *Monitor) recompute() {
	m.state.recompute(m.Devices, m.instanceOf, m.now())
}

func (m *Monitor) instanceOf(d Device) (uint32, uint32, bool) {
	if d.Instance != nil {
		return d.Instance[0], d.Instance[1], true
	}
	if d.MIG && m.InstanceOf != nil {
		return m.InstanceOf(d.DeviceName)
	}
	return 0, 0, false
}

type gpu struct {
	uuid string
	dev  nvml.Device
}

func (m *Monitor) gpus() []gpu {
	seen := map[string]bool{}
	var out []gpu
	for _, d := range m.Devices {
		if !seen[d.UUID] {
			seen[d.UUID] = true
			out = append(out, gpu{uuid: d.UUID, dev: d.NVML})
		}
	}
	return out
}

// nvmlHandle is the GPU's NVML handle. A GPU that a restarted plugin publishes
// from its passthrough record has none until it is bound to nvidia again;
// it is looked up then, and its events go unseen until the next start.
func (m *Monitor) nvmlHandle(g gpu) nvml.Device {
	if g.dev != nil || m.Lib == nil {
		return g.dev
	}
	if h, ok := m.handles.Load(g.uuid); ok {
		return h.(nvml.Device)
	}
	h, ret := m.Lib.DeviceGetHandleByUUID(g.uuid)
	if ret != nvml.SUCCESS {
		return nil
	}
	m.handles.Store(g.uuid, h)
	return h
}

// Run watches events and polls until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	m.init()
	var wg sync.WaitGroup
	wg.Go(func() { m.watchEvents(ctx) })
	m.Poll(ctx)
	m.polled.Store(true)
	ticker := time.NewTicker(m.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-ticker.C:
			m.Poll(ctx)
		}
	}
}

// Poll checks every GPU once: is it lost, and are its event faults over?
func (m *Monitor) Poll(ctx context.Context) {
	m.init()
	logger := klog.FromContext(ctx)
	changed := false
	var withVMs map[string]bool
	if m.Passthrough != nil {
		withVMs = m.Passthrough()
	}
	for _, g := range m.gpus() {
		if withVMs[g.uuid] {
			// Neither lost nor recovered: its faults (if any) stay as
			// they were until it is back.
			continue
		}
		if g.dev = m.nvmlHandle(g); g.dev == nil {
			continue
		}
		_, ret := g.dev.GetMemoryInfo()
		switch ret {
		case nvml.ERROR_GPU_IS_LOST:
			if m.state.add(g.uuid, Fault{Reason: ReasonGPULost, Message: "GPU is lost: it no longer answers on the PCIe bus; drain the node and reset or replace the GPU", Since: m.now(), GI: NoInstance, CI: NoInstance, lost: true}) {
				logger.Info("GPU is lost", "gpu", g.uuid)
				changed = true
			}
			continue
		case nvml.SUCCESS:
			if m.state.clear(g.uuid, func(f Fault) bool { return f.lost }) {
				logger.Info("GPU answers again", "gpu", g.uuid)
				changed = true
			}
		default:
			// Not an answer about the GPU's health: keep what is known.
			logger.V(2).Info("NVML query failed during the health poll", "gpu", g.uuid, "err", nvml.ErrorString(ret))
		}
		if m.checkRecovery(ctx, g) {
			changed = true
		}
	}
	if changed {
		m.recompute()
	}
}

// checkRecovery reads the GPU's pending recovery action: none ends the
// GPU's event faults; one pending at two polls in a row on a GPU without
// faults is a fault from before the plugin started (NVML does not repeat
// its event), which makes the GPU unhealthy until it is reset.
func (m *Monitor) checkRecovery(ctx context.Context, g gpu) bool {
	logger := klog.FromContext(ctx)
	faulty := len(m.state.of(g.uuid)) > 0
	readAt := m.now()
	action, ret := RecoveryAction(g.dev)
	if ret != nvml.SUCCESS || action == nvml.GPU_RECOVERY_ACTION_NONE || faulty {
		delete(m.pendingSeen, g.uuid)
	}
	switch {
	case ret == nvml.SUCCESS && action == nvml.GPU_RECOVERY_ACTION_NONE:
		// Faults recorded after the read may have their action still
		// pending: they wait for the next poll.
		if faulty && m.state.clear(g.uuid, func(f Fault) bool { return !f.lost && f.Since.Before(readAt) }) {
			logger.Info("GPU recovered: NVML reports no pending recovery action", "gpu", g.uuid)
			return true
		}
	case ret == nvml.SUCCESS && !faulty && !m.pendingSeen[g.uuid]:
		// Seen once: an event on its way may still explain it.
		m.pendingSeen[g.uuid] = true
	case ret == nvml.SUCCESS && !faulty:
		msg := fmt.Sprintf("NVML reports a pending recovery action (%s) from a fault before the plugin started", recoveryActionName(action))
		if m.state.add(g.uuid, Fault{Reason: ReasonRecoveryPending, Message: msg, Since: readAt, GI: NoInstance, CI: NoInstance}) {
			logger.Info("GPU waits for recovery", "gpu", g.uuid, "action", recoveryActionName(action))
			return true
		}
	case ret == nvml.SUCCESS:
		logger.V(3).Info("GPU recovery action pending", "gpu", g.uuid, "action", recoveryActionName(action))
	case faulty && (ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT) && !m.unsupported[g.uuid]:
		// Drivers before the recovery-action field (r550) cannot tell
		// when a fault is over: the device stays unhealthy until the
		// plugin restarts, as with NVIDIA's device plugin.
		m.unsupported[g.uuid] = true
		logger.Info("NVML cannot report the GPU's recovery action; its faults clear when the plugin restarts", "gpu", g.uuid, "err", nvml.ErrorString(ret))
	case ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED:
		logger.V(2).Info("Reading the GPU's recovery action failed", "gpu", g.uuid, "err", nvml.ErrorString(ret))
	}
	return false
}

// RecoveryAction asks NVML what the GPU needs before it can be used again
// (nvmlDeviceGetFieldValues with NVML_FI_DEV_GET_GPU_RECOVERY_ACTION,
// driver r550 and later): NONE once the GPU is healthy.
func RecoveryAction(dev nvml.Device) (nvml.DeviceGpuRecoveryAction, nvml.Return) {
	values := []nvml.FieldValue{{FieldId: nvml.FI_DEV_GET_GPU_RECOVERY_ACTION, ScopeId: 0}}
	if ret := dev.GetFieldValues(values); ret != nvml.SUCCESS {
		return 0, ret
	}
	if ret := nvml.Return(values[0].NvmlReturn); ret != nvml.SUCCESS {
		return 0, ret
	}
	// An unsigned int (NVML_VALUE_TYPE_UNSIGNED_INT) in host byte order.
	return nvml.DeviceGpuRecoveryAction(binary.NativeEndian.Uint32(values[0].Value[:4])), nvml.SUCCESS
}

func recoveryActionName(a nvml.DeviceGpuRecoveryAction) string {
	switch a {
	case nvml.GPU_RECOVERY_ACTION_NONE:
		return "none"
	case nvml.GPU_RECOVERY_ACTION_GPU_RESET:
		return "GPU reset"
	case nvml.GPU_RECOVERY_ACTION_NODE_REBOOT:
		return "node reboot"
	case nvml.GPU_RECOVERY_ACTION_DRAIN_P2P:
		return "drain peer-to-peer traffic"
	case nvml.GPU_RECOVERY_ACTION_DRAIN_AND_RESET:
		return "drain and reset"
	default:
		return fmt.Sprintf("action %d", a)
	}
}
