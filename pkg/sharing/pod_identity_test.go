// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 55, defect 4: another node's token could create, on its own node,
// a pod with this node's daemon pod name and node label; this node's
// plugin took it for its running daemon, and could not delete it. A
// daemon pod is this node's only when it is bound to this node (the
// policy pins spec.nodeName to the creating token's node, and it cannot
// change): the plugin neither counts, adopts, lists nor deletes another.
func TestPodRunnerIgnoresAnotherNodesPodUnderItsName(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	squat := r.Pod(d)
	squat.Spec.NodeName = "node-b"
	squat.Annotations["gpu.nvidia.com/mps-node-name"] = "node-b"
	// The node label an earlier version selected this node's daemons by.
	squat.Labels["gpu.nvidia.com/mps-node"] = shortHash("node-a")
	if _, err := c.CoreV1().Pods(r.Namespace).Create(ctx, squat, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Running(ctx, d); ok || err != nil {
		t.Errorf("Running = %v, %v with only node-b's pod under the daemon's name; want false", ok, err)
	}
	if names, err := r.List(ctx); err != nil || len(names) != 0 {
		t.Errorf("List = %v, %v; want none of node-b's pods", names, err)
	}
	err := r.Start(ctx, d)
	if err == nil || !strings.Contains(err.Error(), "node-b") || !strings.Contains(err.Error(), r.PodName(d.DeviceUUID)) {
		t.Errorf("Start with node-b's pod under the daemon's name: %v; want an error naming the pod and its node", err)
	}
	if err := r.Stop(ctx, d); err != nil {
		t.Errorf("Stop: %v; another node's pod is no daemon of this node", err)
	}
	if _, err := c.CoreV1().Pods(r.Namespace).Get(ctx, squat.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("Stop deleted node-b's pod (its policy refuses that on a cluster): %v", err)
	}
}

// The name names the node, so that the policy can check it against the
// token's node (a hash of it it cannot compute); no label claims a node.
func TestPodNameNamesTheNode(t *testing.T) {
	r, _ := newPodRunner("")
	name := r.PodName(fakeUUID)
	if !regexp.MustCompile(`^gpu-mps-node-a-[0-9a-f]{16}$`).MatchString(name) {
		t.Errorf("pod name %q, want gpu-mps-node-a-<16 hex digits>", name)
	}
	other := &PodRunner{NodeName: "node-a-0123456789abcdef"}
	if strings.HasPrefix(other.PodName(fakeUUID), name) || len(other.PodName(fakeUUID)) == len(name) {
		t.Errorf("node-a's %s and node-a-0123456789abcdef's %s: one node's names must not be another's", name, other.PodName(fakeUUID))
	}
	p := r.Pod((&MPS{Root: "/s/mps"}).Daemon(fakeUUID))
	if len(p.Labels) != 1 || p.Labels[DaemonComponentLabel] != DaemonComponent || p.Spec.NodeName != "node-a" {
		t.Errorf("labels %v, node %q; want the component label only, and this node", p.Labels, p.Spec.NodeName)
	}
	// A node name too long to fit is refused before the API server is
	// asked.
	long := &PodRunner{Client: r.Client, Namespace: r.Namespace, NodeName: strings.Repeat("n", 240)}
	if err := long.Start(context.Background(), (&MPS{Root: t.TempDir()}).Daemon(fakeUUID)); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("Start on a node with a 240-character name: %v", err)
	}
}

// A daemon pod of an earlier version (named by a hash only, with a node
// label) that runs on this node keeps serving its clients across the
// plugin's upgrade: it is running, listed, not doubled by Start, and
// Stop deletes it.
func TestPodRunnerKeepsADaemonPodOfAnEarlierVersion(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	d := (&MPS{Root: t.TempDir()}).Daemon(fakeUUID)
	old := r.Pod(d)
	old.Name = r.legacyPodName(d.DeviceUUID)
	old.Labels["gpu.nvidia.com/mps-node"] = shortHash("node-a")
	old.UID = "old-uid"
	if _, err := c.CoreV1().Pods(r.Namespace).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.Running(ctx, d); !ok || err != nil {
		t.Fatalf("Running = %v, %v with the earlier version's daemon pod", ok, err)
	}
	if names, err := r.List(ctx); err != nil || !slices.Equal(names, []string{fakeUUID}) {
		t.Errorf("List = %v, %v", names, err)
	}
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	list, _ := c.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("%d pods after Start, want the earlier daemon pod only", len(list.Items))
	}
	if err := r.Stop(ctx, d); err != nil {
		t.Fatal(err)
	}
	if list, _ := c.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("pods left after Stop: %v", list.Items)
	}
	// One that ended is replaced by a pod of this version's name.
	old.Status.Phase = corev1.PodFailed
	if _, err := c.CoreV1().Pods(r.Namespace).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	list, _ = c.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 || list.Items[0].Name != r.PodName(d.DeviceUUID) {
		t.Errorf("after Start over an ended earlier pod: %d pods, want only %s", len(list.Items), r.PodName(d.DeviceUUID))
	}
}
