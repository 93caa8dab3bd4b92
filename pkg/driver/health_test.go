// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// taintOf returns the unhealthy taint of a published device ("" if none)
// as "value/effect".
func (n *node) taintOf(device string) string {
	list, err := n.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			if d.Name != device {
				continue
			}
			for _, t := range d.Taints {
				if t.Key == resourceslices.TaintUnhealthy {
					return t.Value + "/" + string(t.Effect)
				}
			}
		}
	}
	return ""
}

func (n *node) nodeEvents(reason string) int {
	list, err := n.client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	count := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Node" && e.Reason == reason {
			count++
		}
	}
	return count
}

func (n *node) healthCondition(claim string) string {
	c, err := n.client.ResourceV1().ResourceClaims("default").Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil || len(c.Status.Devices) == 0 || len(c.Status.Devices[0].Conditions) == 0 {
		return ""
	}
	cond := c.Status.Devices[0].Conditions[0]
	return cond.Type + "=" + string(cond.Status) + "/" + cond.Reason
}

func TestXIDTaintsTheDeviceUntilTheGPURecovers(t *testing.T) {
	n := newNodeWith(t, "h100x2", false)
	n.health = HealthConfig{TaintEffect: resourceapi.DeviceTaintEffectNoExecute, PollInterval: 50 * time.Millisecond}
	n.restart("h100x2")
	n.publishedSlices()
	sim, inv := n.driver.cfg.Backend.Simulator, n.driver.cfg.Backend.Inventory
	uuid := inv.GPUs[1].UUID
	device := deviceattr.GPUDeviceName(inv.GPUs[1].Minor)
	claim := n.claim("sick", []string{device})
	n.mustPrepare(claim)
	waitFor(t, "healthy condition", func() bool { return n.healthCondition("sick") == "Healthy=True/NoFaults" })

	// The kubelet's health stream, over the plugin's socket.
	streamCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := drahealthv1.NewDRAResourceHealthClient(n.conn).NodeWatchResources(streamCtx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// waitHealth reads reports until the device has the wanted health (a
	// report sent before a change may still be on its way).
	waitHealth := func(want drahealthv1.HealthStatus) {
		t.Helper()
		for {
			r, err := stream.Recv()
			if err != nil {
				t.Fatalf("waiting for %v: %v", want, err)
			}
			for _, d := range r.Devices {
				if d.Device.DeviceName == device && d.Health == want {
					return
				}
			}
		}
	}
	waitHealth(drahealthv1.HealthStatus_HEALTHY)

	// An application XID changes nothing.
	sim.InjectXid(uuid, 13)
	if err := sim.SetXIDFault(uuid, "79"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "taint", func() bool { return n.taintOf(device) == "xid-79/NoExecute" })
	if other := deviceattr.GPUDeviceName(inv.GPUs[0].Minor); n.taintOf(other) != "" {
		t.Fatalf("healthy %s tainted: %s", other, n.taintOf(other))
	}
	waitHealth(drahealthv1.HealthStatus_UNHEALTHY)
	waitFor(t, "unhealthy condition", func() bool { return n.healthCondition("sick") == "Healthy=False/Xid79" })
	waitFor(t, "GPUUnhealthy event", func() bool { return n.nodeEvents("GPUUnhealthy") == 1 })
	if v := metricValue(t, n, "gpu_dra_device_healthy", "device", device); v != 0 {
		t.Errorf("gpu_dra_device_healthy of %s = %v", device, v)
	}
	if v := metricValue(t, n, "gpu_dra_xid_events_total", "xid", "79"); v != 1 {
		t.Errorf("gpu_dra_xid_events_total{xid=79} = %v", v)
	}
	if v := metricValue(t, n, "gpu_dra_xid_events_total", "xid", "13"); v != 1 {
		t.Errorf("gpu_dra_xid_events_total{xid=13} = %v", v)
	}

	// Removing the fault file is the reset: everything clears by itself.
	if err := sim.SetXIDFault(uuid, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "taint removed", func() bool { return n.taintOf(device) == "" })
	waitHealth(drahealthv1.HealthStatus_HEALTHY)
	waitFor(t, "healthy condition again", func() bool { return n.healthCondition("sick") == "Healthy=True/NoFaults" })
	waitFor(t, "GPURecovered event", func() bool { return n.nodeEvents("GPURecovered") == 1 })
	if v := metricValue(t, n, "gpu_dra_device_healthy", "device", device); v != 1 {
		t.Errorf("gpu_dra_device_healthy of %s after recovery = %v", device, v)
	}
	if n.nodeEvents("GPUUnhealthy") != 1 {
		t.Error("more than one GPUUnhealthy event for one fault")
	}
}

func TestConditionReasons(t *testing.T) {
	for in, want := range map[string]string{"xid-79": "Xid79", "ecc-dbe": "DoubleBitECCError", "gpu-lost": "GPULost", "other": "Unhealthy"} {
		if got := conditionReason(in); got != want || strings.ContainsAny(got, "-.") {
			t.Errorf("conditionReason(%q) = %q, want %q", in, got, want)
		}
	}
}

// metricValue reads one series from the driver's registry, -1 if absent.
func metricValue(t *testing.T, n *node, name, label, value string) float64 {
	t.Helper()
	families, err := n.driver.cfg.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}
