// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// Gather reads what usage and capacity look at with a few List calls
// (ResourceSlices, ResourceClaims of all namespaces, DeviceTaintRules,
// DeviceClasses) and, for a template, one Get. Pods are not listed: a claim's reservedFor
// names the pods that use it, which is what the scheduler goes by.
func Gather(ctx context.Context, cs kubernetes.Interface, driverName, template string) (*clusterview.Snapshot, error) {
	s := &clusterview.Snapshot{DriverName: driverName, ServerVersion: clusterview.ServerVersion(cs)}
	all := metav1.ListOptions{}
	// In pages, without managed fields: at 500 dynamic-MIG nodes the
	// slices are ~0.5 GiB decoded, and one response of all of them, plus
	// the field manager's record of every device field, would double it.
	err := paged(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := cs.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			list.Items[i].ManagedFields = nil
		}
		s.Slices = append(s.Slices, list.Items...)
		return list.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices (is this a DRA-enabled cluster, and may you read cluster-scoped objects?): %w", err)
	}
	// Without every claim, allocated devices would look free.
	err = paged(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := cs.ResourceV1().ResourceClaims("").List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			list.Items[i].ManagedFields = nil
		}
		s.Claims = append(s.Claims, list.Items...)
		return list.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims of all namespaces (needed to tell free from allocated devices): %w", err)
	}
	// DeviceTaintRules taint devices without changing their slices; the
	// scheduler applies them as if the slices carried the taints. A
	// cluster without the API, or a user who may not list them, still
	// gets an answer: without the rules' taints.
	if rules, err := cs.ResourceV1().DeviceTaintRules().List(ctx, all); err == nil {
		ApplyTaintRules(s.Slices, rules.Items)
	}
	classes, err := cs.ResourceV1().DeviceClasses().List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list DeviceClasses: %w", err)
	}
	s.DeviceClasses = classes.Items
	if template != "" {
		ns, name, ok := strings.Cut(template, "/")
		if !ok {
			return nil, fmt.Errorf("--template %q: expected NAMESPACE/NAME", template)
		}
		t, err := cs.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("--template %s: %w (kubectl get resourceclaimtemplates -n %s)", template, err, ns)
		}
		s.ClaimTemplates = append(s.ClaimTemplates, *t)
	}
	return s, nil
}

// pageSize is the objects per List call: 100 slices of a dynamic-MIG
// node are a few MB.
const pageSize = 100

// paged calls list until the API server has no more pages.
func paged(ctx context.Context, list func(metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		next, err := list(opts)
		if err != nil || next == "" {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		opts.Continue = next
	}
}

// ApplyTaintRules adds each rule's taint to the devices its selector
// matches (driver, pool, device; an empty field matches all), as the
// scheduler sees them. It changes slices in place.
func ApplyTaintRules(slices []resourceapi.ResourceSlice, rules []resourceapi.DeviceTaintRule) {
	is := func(want *string, got string) bool { return want == nil || *want == got }
	for _, r := range rules {
		sel := r.Spec.DeviceSelector
		if sel == nil {
			sel = &resourceapi.DeviceTaintSelector{}
		}
		for i := range slices {
			sl := &slices[i]
			if !is(sel.Driver, sl.Spec.Driver) || !is(sel.Pool, sl.Spec.Pool.Name) {
				continue
			}
			for j := range sl.Spec.Devices {
				if d := &sl.Spec.Devices[j]; is(sel.Device, d.Name) {
					d.Taints = append(d.Taints, r.Spec.Taint)
				}
			}
		}
	}
}
