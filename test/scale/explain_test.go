// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/pendingexplainer"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// The benchmark only runs the webhook binary, so it matches the Event and
// the log line by text: a change in the explainer must show up here, not
// as a benchmark that waits out its timeouts.
func TestExplainerTexts(t *testing.T) {
	if explainReason != pendingexplainer.Reason {
		t.Errorf("explainReason %q, pendingexplainer.Reason %q", explainReason, pendingexplainer.Reason)
	}
	src, err := os.ReadFile("../../pkg/pendingexplainer/explainer.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), syncedMarker) {
		t.Errorf("pkg/pendingexplainer no longer logs %q once synced", syncedMarker)
	}
}

func TestTaintedSlices(t *testing.T) {
	attrs := func(kv ...any) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		m := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
		for i := 0; i < len(kv); i += 2 {
			switch v := kv[i+1].(type) {
			case int:
				m[resourceapi.QualifiedName(kv[i].(string))] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(v))}
			case string:
				m[resourceapi.QualifiedName(kv[i].(string))] = resourceapi.DeviceAttribute{StringValue: ptr.To(v)}
			}
		}
		return m
	}
	slice := func(name string, devs ...resourceapi.Device) resourceapi.ResourceSlice {
		return resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceSliceSpec{
			Driver: "gpu.nvidia.com", NodeName: ptr.To("n1"), Devices: devs,
			Pool: resourceapi.ResourcePool{Name: "n1", Generation: 3, ResourceSliceCount: 2}}}
	}
	old := []resourceapi.ResourceSlice{
		slice("b", resourceapi.Device{Name: "gpu-1-mig-1g", Attributes: attrs("parentUUID", "U1")},
			resourceapi.Device{Name: "gpu-0-mig-1g", Attributes: attrs("parentUUID", "U0")}),
		slice("a", resourceapi.Device{Name: "gpu-0", Attributes: attrs("index", 0, "uuid", "U0")},
			resourceapi.Device{Name: "gpu-1", Attributes: attrs("index", 1, "uuid", "U1")}),
	}
	objs, n, err := taintedSlices(old, "n1", 1, time.Unix(100, 5))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("%d devices tainted, want gpu-1 and its MIG device", n)
	}
	var tainted []string
	for _, s := range objs {
		if s.Spec.Pool.Generation != 4 {
			t.Errorf("pool generation %d, want 4", s.Spec.Pool.Generation)
		}
		for _, d := range s.Spec.Devices {
			for _, tn := range d.Taints {
				if tn.Key != resourceslices.TaintUnhealthy || tn.Effect != resourceapi.DeviceTaintEffectNoSchedule || tn.TimeAdded.Unix() != 100 {
					t.Errorf("device %s: taint %+v", d.Name, tn)
				}
				tainted = append(tainted, d.Name)
			}
		}
	}
	if strings.Join(tainted, ",") != "gpu-1,gpu-1-mig-1g" {
		t.Errorf("tainted %v, want gpu-1 and gpu-1-mig-1g in the slices' order", tainted)
	}
	if _, _, err := taintedSlices(old, "n1", 9, time.Now()); err == nil {
		t.Error("no error for a GPU index the node does not have")
	}
}

func TestProcMem(t *testing.T) {
	rss, hwm := procMem(os.Getpid())
	if rss <= 0 || hwm < rss {
		t.Errorf("VmRSS %.1f MiB, VmHWM %.1f MiB", rss, hwm)
	}
}
