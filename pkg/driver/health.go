// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// HealthConfig is how device health reaches the cluster.
type HealthConfig struct {
	// TaintEffect of the taint an unhealthy device gets: NoSchedule (new
	// claims avoid it) or NoExecute (pods using it are evicted too).
	TaintEffect resourceapi.DeviceTaintEffect
	// IgnoredXIDs extend health.DefaultIgnoredXIDs.
	IgnoredXIDs []uint64
	// PollInterval overrides the monitor's slow poll (tests).
	PollInterval time.Duration
}

// ConditionHealthy is the type of the condition a prepared device gets in
// its claim's status.devices[].conditions.
const ConditionHealthy = "Healthy"

func (d *Driver) newMonitor(watched []health.Device, book *ledger.Ledger) *health.Monitor {
	m := health.New(d.cfg.Backend.NVML, watched, health.IgnoredXIDs(d.cfg.Health.IgnoredXIDs))
	if d.cfg.Health.PollInterval > 0 {
		m.Interval = d.cfg.Health.PollInterval
	}
	m.OnXID = func(_ string, xid uint64, _ bool) {
		d.cfg.Metrics.XIDEvents.WithLabelValues(fmt.Sprint(xid)).Inc()
	}
	// Asked only once Start has built the state (before Run).
	m.Passthrough = func() map[string]bool { return book.View().Passthrough() }
	// A dynamic MIG device is an instance only while a claim holds it.
	// A claim allocated before dynamic MIG names carried the profile ID
	// holds it under its older name.
	m.InstanceOf = func(device string) (uint32, uint32, bool) {
		legacy, _ := deviceattr.LegacyMigDeviceName(device)
		for _, rec := range book.View().Records() {
			for _, pd := range rec.Devices {
				if (pd.Device == device || pd.Device == legacy) && pd.Mig != nil && pd.Mig.GIID >= 0 && pd.Mig.CIID >= 0 {
					return uint32(pd.Mig.GIID), uint32(pd.Mig.CIID), true
				}
			}
		}
		return 0, 0, false
	}
	return m
}

// deviceCondition is the health condition of a prepared device, for the
// device-status writer.
func (d *Driver) deviceCondition(pool, device string) (metav1.Condition, bool) {
	if pool != d.cfg.NodeName || d.health == nil {
		return metav1.Condition{}, false
	}
	st, ok := d.health.Status(device)
	if !ok {
		return metav1.Condition{}, false
	}
	c := metav1.Condition{Type: ConditionHealthy, LastTransitionTime: metav1.NewTime(st.Since.Truncate(time.Second))}
	if st.Healthy {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "NoFaults", "NVML reports no fault on this device"
	} else {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, conditionReason(st.Reason), st.Message
	}
	return c, true
}

// conditionReason turns a taint value into a condition reason, which must
// be CamelCase: "xid-79" -> "Xid79", "ecc-dbe" -> "DoubleBitECCError".
func conditionReason(reason string) string {
	switch reason {
	case health.ReasonDoubleBitECC:
		return "DoubleBitECCError"
	case health.ReasonGPULost:
		return "GPULost"
	}
	if n, ok := strings.CutPrefix(reason, "xid-"); ok {
		return "Xid" + n
	}
	return "Unhealthy"
}

// followHealth publishes what the monitor finds: taints in the
// ResourceSlices, the health gauge, Node events per GPU and the condition
// in the status of claims that hold an affected device.
func (d *Driver) followHealth(ctx context.Context, publish func(context.Context, map[string][]resourceapi.DeviceTaint) error, book *ledger.Ledger, watched []health.Device) {
	logger := klog.FromContext(ctx)
	changes, stop := d.health.Subscribe()
	defer stop()
	prev := map[string]health.Status{}
	gpuSick := map[string]bool{}
	published := "" // the taints last published, as text
	for {
		changed := map[string]bool{}
		taints := map[string][]resourceapi.DeviceTaint{}
		var keys []string
		var newest time.Time // the latest health change, for the publish log
		for _, w := range watched {
			st, _ := d.health.Status(w.DeviceName)
			healthy := 0.0
			if st.Healthy {
				healthy = 1
			} else {
				taints[w.DeviceName] = []resourceapi.DeviceTaint{{
					Key: resourceslices.TaintUnhealthy, Value: st.Reason, Effect: d.cfg.Health.TaintEffect,
					// Whole seconds: what the apiserver stores, so that an
					// unchanged taint is not re-sent.
					TimeAdded: &metav1.Time{Time: time.Unix(st.Since.Unix(), 0)},
				}}
				keys = append(keys, w.DeviceName+"="+st.Reason)
			}
			d.cfg.Metrics.DeviceHealthy.WithLabelValues(w.DeviceName, w.UUID).Set(healthy)
			if p, ok := prev[w.DeviceName]; (!ok && !st.Healthy) || (ok && (p.Healthy != st.Healthy || p.Reason != st.Reason)) {
				changed[w.DeviceName] = true
			}
			prev[w.DeviceName] = st
			if st.Since.After(newest) {
				newest = st.Since
			}
		}
		if now := strings.Join(keys, ","); now != published {
			start := time.Now()
			if err := publish(ctx, taints); err != nil {
				logger.Error(err, "Publishing device taints failed")
			} else {
				published = now
				logger.Info("Published device health in ResourceSlices", "taintedDevices", len(taints), "effect", d.cfg.Health.TaintEffect, "duration", time.Since(start), "sinceChange", time.Since(newest))
			}
		}
		d.reportGPUs(ctx, watched, gpuSick)
		if len(changed) > 0 {
			d.refreshClaimStatus(book, changed)
		}
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
	}
}

// reportGPUs records a Node event when a GPU turns unhealthy and when it
// recovers.
func (d *Driver) reportGPUs(ctx context.Context, watched []health.Device, sick map[string]bool) {
	logger := klog.FromContext(ctx)
	seen := map[string]bool{}
	for _, w := range watched {
		if seen[w.UUID] {
			continue
		}
		seen[w.UUID] = true
		faults := d.health.Faults(w.UUID)
		switch {
		case len(faults) > 0 && !sick[w.UUID]:
			sick[w.UUID] = true
			var why []string
			for _, f := range faults {
				why = append(why, f.Message)
			}
			msg := fmt.Sprintf("GPU %s is unhealthy: %s; its devices are tainted %s (%s)", w.UUID, strings.Join(why, "; "), resourceslices.TaintUnhealthy, d.cfg.Health.TaintEffect)
			logger.Info("GPU unhealthy", "gpu", w.UUID, "faults", why)
			go recordNodeEvent(ctx, d.cfg.Client, d.cfg.NodeName, v1.EventTypeWarning, "GPUUnhealthy", msg)
		case len(faults) == 0 && sick[w.UUID]:
			delete(sick, w.UUID)
			logger.Info("GPU recovered", "gpu", w.UUID)
			go recordNodeEvent(ctx, d.cfg.Client, d.cfg.NodeName, v1.EventTypeNormal, "GPURecovered", fmt.Sprintf("GPU %s is healthy again; the %s taint is removed", w.UUID, resourceslices.TaintUnhealthy))
		}
	}
}

// refreshClaimStatus re-writes the device status of prepared claims that
// hold a device whose health changed.
func (d *Driver) refreshClaimStatus(book *ledger.Ledger, changed map[string]bool) {
	for _, rec := range book.View().Records() {
		if rec.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, pd := range rec.Devices {
			if pd.Pool == d.cfg.NodeName && changed[pd.Device] {
				d.status.Prepared(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: rec.Namespace, Name: rec.Name, UID: rec.UID}}, rec.Devices)
				break
			}
		}
	}
}
