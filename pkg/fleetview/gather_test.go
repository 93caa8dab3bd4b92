// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// TestGather reads slices, claims, classes and the named template, without
// the slices' managed fields, applies DeviceTaintRules, and names the flag
// of a missing template.
func TestGather(t *testing.T) {
	s := demoFleet(t)
	var objs []runtime.Object
	for i := range s.Slices {
		sl := s.Slices[i].DeepCopy()
		sl.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "gpu-kubelet-plugin"}}
		objs = append(objs, sl)
	}
	for i := range s.Claims {
		objs = append(objs, &s.Claims[i])
	}
	for i := range s.DeviceClasses {
		objs = append(objs, &s.DeviceClasses[i])
	}
	objs = append(objs, &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "t"}})
	dev := "gpu-0"
	objs = append(objs, &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Device: &dev}, Taint: resourceapi.DeviceTaint{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}})
	cs := fake.NewClientset(objs...)

	got, err := Gather(context.Background(), cs, driver, "team-a/t")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Slices) != len(s.Slices) || len(got.Claims) != len(s.Claims) || len(got.DeviceClasses) != len(s.DeviceClasses) || len(got.ClaimTemplates) != 1 {
		t.Fatalf("gathered %d slices, %d claims, %d classes, %d templates", len(got.Slices), len(got.Claims), len(got.DeviceClasses), len(got.ClaimTemplates))
	}
	if got.Slices[0].ManagedFields != nil {
		t.Error("managed fields kept")
	}
	// The rule taints gpu-0 of both nodes; n2's GPU 1 was tainted before.
	want := NewReport(Usage(s, Filter{})).Total
	want.Tainted = 3
	if r := NewReport(Usage(got, Filter{})); r.Total != want {
		t.Errorf("usage of the gathered state %+v, want %+v", r.Total, want)
	}
	if _, err := Gather(context.Background(), cs, driver, "team-a/none"); err == nil || !strings.Contains(err.Error(), "--template team-a/none") {
		t.Errorf("missing template: %v", err)
	}
}

// TestTaintRules: a DeviceTaintRule's taint shows on the GPU it selects,
// and capacity leaves the device out, as the scheduler does.
func TestTaintRules(t *testing.T) {
	s := demoFleet(t)
	before, err := Capacity(context.Background(), s, Request{Class: "gpu.nvidia.com"}, "n2", 10)
	if err != nil || before.Total != 1 {
		t.Fatalf("n2 takes %+v (%v), want 1 GPU (GPU 1 is tainted in its slice)", before, err)
	}
	drv, pool, dev := driver, "n2", "gpu-0"
	rule := resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "drain-n2-gpu-0"}, Spec: resourceapi.DeviceTaintRuleSpec{
		DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: &drv, Pool: &pool, Device: &dev},
		Taint:          resourceapi.DeviceTaint{Key: "example.com/maintenance", Effect: resourceapi.DeviceTaintEffectNoSchedule},
	}}
	ApplyTaintRules(s.Slices, []resourceapi.DeviceTaintRule{rule})
	var tainted []string
	for _, g := range Usage(s, Filter{}) {
		if len(g.Taints) > 0 {
			tainted = append(tainted, fmt.Sprintf("%s/%d %v", g.Node, g.Index, g.Taints))
		}
	}
	if want := "[n2/0 [example.com/maintenance=:NoSchedule] n2/1 [gpu.nvidia.com/unhealthy=xid-79:NoSchedule]]"; fmt.Sprint(tainted) != want {
		t.Errorf("tainted GPUs %v, want %s", tainted, want)
	}
	after, err := Capacity(context.Background(), s, Request{Class: "gpu.nvidia.com"}, "n2", 10)
	if err != nil || after.Total != 0 {
		t.Errorf("n2 takes %+v (%v) with both GPUs tainted, want 0", after, err)
	}
}
