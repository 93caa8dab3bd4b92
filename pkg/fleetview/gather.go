// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/diagnose"
)

// Gather reads what usage and capacity look at with three List calls
// (ResourceSlices, ResourceClaims of all namespaces, DeviceClasses) and,
// for a template, one Get. Pods are not listed: a claim's reservedFor
// names the pods that use it, which is what the scheduler goes by.
func Gather(ctx context.Context, cs kubernetes.Interface, driverName, template string) (*diagnose.Snapshot, error) {
	s := &diagnose.Snapshot{DriverName: driverName}
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
