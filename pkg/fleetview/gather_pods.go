// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/podfit"
)

// GatherForPod reads what PodCapacity looks at: what Gather reads, and
// the nodes, the pods bound to nodes and not ended (their requests take
// room; pods of all namespaces, in pages, as the scheduler's cache holds
// them) and the namespace's ResourceClaimTemplates (the pod's claims).
func GatherForPod(ctx context.Context, cs kubernetes.Interface, driverName, namespace string) (*clusterview.Snapshot, error) {
	s, err := Gather(ctx, cs, driverName, "")
	if err != nil {
		return nil, err
	}
	err = paged(ctx, func(opts metav1.ListOptions) (string, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			n := &list.Items[i]
			n.ManagedFields, n.Status.Images = nil, nil
		}
		s.Nodes = append(s.Nodes, list.Items...)
		return list.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list Nodes (capacity of a pod checks each node's taints, labels and room): %w", err)
	}
	s.Pods, err = podfit.ListBoundPods(ctx, cs)
	if err != nil {
		return nil, fmt.Errorf("list Pods of all namespaces (their requests take each node's CPU, memory and pod slots): %w", err)
	}
	templates, err := cs.ResourceV1().ResourceClaimTemplates(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaimTemplates in namespace %s: %w", namespace, err)
	}
	s.ClaimTemplates = templates.Items
	return s, nil
}
