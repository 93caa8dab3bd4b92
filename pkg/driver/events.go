// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// instanceToken identifies this plugin instance to the state-dir fence:
// the pod UID in a cluster, else something unique to the process.
func instanceToken(podUID types.UID) string {
	if podUID != "" {
		return string(podUID)
	}
	return fmt.Sprintf("pid-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// reportToNode records a Warning event on the Node, where an operator
// looking at `kubectl describe node` finds it. Best effort: the same
// problems are logged and counted in the errors metric.
func reportToNode(ctx context.Context, client kubernetes.Interface, node, reason string, problems []string) {
	const maxMessage = 1024 // events are for humans; the log has everything
	msg := fmt.Sprintf("%d problem(s) with the plugin's saved state, handled without stopping: %s", len(problems), strings.Join(problems, "; "))
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	recordNodeEvent(ctx, client, node, v1.EventTypeWarning, reason, msg)
}

// RecordNodeEvent creates one event on the Node, for what happens before
// the driver starts (cmd/gpu-kubelet-plugin waits for NVML). Best effort:
// a failure is logged at V(2).
func RecordNodeEvent(ctx context.Context, client kubernetes.Interface, node, eventType, reason, msg string) {
	recordNodeEvent(ctx, client, node, eventType, reason, msg)
}

// recordNodeEvent creates one event on the Node.
func recordNodeEvent(ctx context.Context, client kubernetes.Interface, node, eventType, reason, msg string) {
	// The Node is cluster-scoped: its events go to the default namespace.
	obj := v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node), APIVersion: "v1"}
	if err := recordEvent(ctx, client, node, metav1.NamespaceDefault, obj, eventType, reason, msg); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not record Node event", "reason", reason, "err", err)
	}
}

// recordEvent creates one event on obj, in namespace ns (obj's own, or
// the default namespace for a cluster-scoped object).
func recordEvent(ctx context.Context, client kubernetes.Interface, node, ns string, obj v1.ObjectReference, eventType, reason, msg string) error {
	now := metav1.NewTime(time.Now())
	ev := &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: obj.Name + ".", Namespace: ns},
		InvolvedObject: obj,
		Reason:         reason,
		Message:        msg,
		Type:           eventType,
		Source:         v1.EventSource{Component: "gpu-kubelet-plugin", Host: node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	_, err := client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
