// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// TestGather reads slices, claims, classes and the named template, without
// the slices' managed fields, and names the flag of a missing template.
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
	if r := NewReport(Usage(got, Filter{})); r.Total != NewReport(Usage(s, Filter{})).Total {
		t.Errorf("usage of the gathered state %+v differs", r.Total)
	}
	if _, err := Gather(context.Background(), cs, driver, "team-a/none"); err == nil || !strings.Contains(err.Error(), "--template team-a/none") {
		t.Errorf("missing template: %v", err)
	}
}
