// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package podfit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// pageSize is the pods per List call (as pkg/fleetview pages slices).
const pageSize = 100

// ListBoundPods lists the pods bound to nodes and not ended, of all
// namespaces, in pages, as the scheduler's cache holds them (their
// requests take each node's CPU, memory and pod slots), each slimmed to
// what its requests are computed from (Slim).
func ListBoundPods(ctx context.Context, cs kubernetes.Interface) ([]corev1.Pod, error) {
	var out []corev1.Pod
	opts := metav1.ListOptions{Limit: pageSize, FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"}
	for {
		list, err := cs.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			out = append(out, Slim(&list.Items[i]))
		}
		if list.Continue == "" {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		opts.Continue = list.Continue
	}
}

// Slim keeps of a bound pod what its requests are computed from: a
// fleet's pods are many, and the rest of each is not looked at.
func Slim(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	out.Spec.NodeName = p.Spec.NodeName
	out.Spec.Overhead = p.Spec.Overhead
	out.Spec.Resources = p.Spec.Resources
	out.Status.Phase = p.Status.Phase
	for _, list := range []struct {
		in  []corev1.Container
		out *[]corev1.Container
	}{{p.Spec.InitContainers, &out.Spec.InitContainers}, {p.Spec.Containers, &out.Spec.Containers}} {
		for _, c := range list.in {
			*list.out = append(*list.out, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
		}
	}
	return out
}
