// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDroppedMigProfileStaysUntilReleased: --mig-profiles changes (a chart
// upgrade restarts the plugin) while a claim holds a MIG device of a
// profile the new list leaves out. The restarted plugin still publishes
// that profile on that GPU, so the scheduler keeps counting the device and
// the claim unprepares; once it is released, the next start drops it.
func TestDroppedMigProfileStaysUntilReleased(t *testing.T) {
	n := newMigNode(t, "h100x1")
	c := n.claim("mig", []string{"gpu-0-mig-2g20gb-14-0"})
	n.mustPrepare(c)

	n.migProfiles = []string{"1g.10gb"}
	names := restartedNames(t, n)
	if !slices.Contains(names, "gpu-0-mig-2g20gb-14-0") {
		t.Fatalf("the held 2g.20gb is no longer published: %v", names)
	}
	if slices.Contains(names, "gpu-0-mig-1g20gb-15-0") {
		t.Fatalf("a profile neither listed nor held is published: %v", names)
	}
	n.unprepare(c) // fails the test on an error

	if names := restartedNames(t, n); slices.Contains(names, "gpu-0-mig-2g20gb-14-0") || !slices.Contains(names, "gpu-0-mig-1g10gb-19-6") {
		t.Fatalf("after release: published %v, want the GPU and 1g.10gb only", names)
	}
}

// restartedNames restarts the plugin and returns the devices it publishes.
// The old plugin's slices are removed first: they would satisfy the wait
// for a complete pool before the new plugin publishes its own.
func restartedNames(t *testing.T, n *node) []string {
	t.Helper()
	n.stop()
	ctx := context.Background()
	list, err := n.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if err := n.client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n.start("h100x1")
	return n.publishedNames()
}

func (n *node) publishedNames() []string {
	var out []string
	for _, s := range n.publishedSlices() {
		for _, d := range s.Spec.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}
