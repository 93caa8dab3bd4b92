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
	slices, err := cs.ResourceV1().ResourceSlices().List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices (is this a DRA-enabled cluster, and may you read cluster-scoped objects?): %w", err)
	}
	s.Slices = slices.Items
	// Without every claim, allocated devices would look free.
	claims, err := cs.ResourceV1().ResourceClaims("").List(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims of all namespaces (needed to tell free from allocated devices): %w", err)
	}
	s.Claims = claims.Items
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
