// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// seedSlices publishes a node's first ResourceSlices directly, before the
// kubelet plugin helper's resourceslice controller takes over.
//
// Why: the controller waits for its informer by polling once per second
// (dynamic-resource-allocation v0.37.0, Controller.initInformer), so on a
// new node nothing is schedulable for the first second. Seeding makes the
// devices visible within milliseconds of discovery.
//
// The seeded objects are exactly what the controller itself would create
// for a pool it has never published (resourceslices.Objects), with the node as
// controlling owner, so the controller adopts them without an API call
// (TestSeededSlicesAdoptedWithoutWrites proves it against the real
// controller). If that contract ever drifted, the controller would simply
// replace the seeds: slower, never wrong.
//
// Seeding only happens when the node has no slice of this driver at all; a
// restarted plugin, or a second pod during a rolling update, leaves existing
// slices to the controller. It returns how many slices it created.
func seedSlices(ctx context.Context, client kubernetes.Interface, driverName, nodeName string, resources resourceslice.DriverResources) (int, error) {
	selector := fields.Set{resourceapi.ResourceSliceSelectorDriver: driverName, resourceapi.ResourceSliceSelectorNodeName: nodeName}.String()
	existing, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return 0, fmt.Errorf("list ResourceSlices: %w", err)
	}
	for _, s := range existing.Items {
		// Fake clients ignore field selectors; check again.
		if s.Spec.Driver == driverName && ptr.Deref(s.Spec.NodeName, "") == nodeName {
			return 0, nil
		}
	}
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get node for the slices' owner reference: %w", err)
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID, Controller: ptr.To(true)}
	objs := resourceslices.Objects(driverName, nodeName, resources)
	g, ctx := errgroup.WithContext(ctx)
	for i := range objs {
		slice := &objs[i]
		slice.OwnerReferences = []metav1.OwnerReference{owner}
		g.Go(func() error {
			_, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("create ResourceSlice: %w", err)
	}
	return len(objs), nil
}
