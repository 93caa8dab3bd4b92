// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// doneQueue tells when the controller has finished one sync of a pool.
type doneQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	synced chan string
}

func (q *doneQueue) Done(item string) {
	q.TypedRateLimitingInterface.Done(item)
	q.synced <- item
}

// runController runs the real resourceslice controller, configured like the
// kubelet plugin helper configures it, until it has synced the pool once,
// and returns its create/update/delete counts.
func runController(t *testing.T, client *fake.Clientset, resources *resourceslice.DriverResources) resourceslice.Stats {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	q := &doneQueue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		synced:                     make(chan string, 16),
	}
	c, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: testDriver, KubeClient: client, Resources: resources, Queue: q,
		Owner: &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: testNode},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); c.Stop() }()
	select {
	case <-q.synced:
	case <-time.After(10 * time.Second):
		t.Fatal("controller did not sync the pool")
	}
	return c.GetStats()
}

func sliceWrites(client *fake.Clientset) (n int) {
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "resourceslices" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			n++
		}
	}
	return n
}

func simulatedResources(t *testing.T, profile string) resourceslice.DriverResources {
	t.Helper()
	_, inv, err := simulate.Discover(profile, testNode, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return resourceslices.Build(testNode, inv, resourceslices.Options{DynamicMIG: true})
}

func TestSeededSlicesAdoptedWithoutWrites(t *testing.T) {
	ctx := context.Background()
	resources := simulatedResources(t, "h100x8") // 5 slices: counters + devices
	pool := resources.Pools[testNode]

	t.Run("controller alone creates the slices", func(t *testing.T) {
		client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
		stats := runController(t, client, resources.DeepCopy())
		if stats.NumCreates != int64(len(pool.Slices)) {
			t.Fatalf("controller created %d slices, want %d", stats.NumCreates, len(pool.Slices))
		}
	})

	t.Run("seeded slices are adopted as they are", func(t *testing.T) {
		client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
		n, err := seedSlices(ctx, client, testDriver, testNode, resources)
		if err != nil || n != len(pool.Slices) {
			t.Fatalf("seeded %d slices (err %v), want %d", n, err, len(pool.Slices))
		}
		seeded, _ := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		for _, s := range seeded.Items {
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "node-uid" || !strings.HasPrefix(s.Name, "0000") {
				t.Errorf("slice %s: owner %v", s.Name, s.OwnerReferences)
			}
		}
		client.ClearActions()
		stats := runController(t, client, resources.DeepCopy())
		if stats.NumCreates+stats.NumUpdates+stats.NumDeletes != 0 || sliceWrites(client) != 0 {
			t.Fatalf("controller rewrote seeded slices: %+v, actions %v", stats, client.Actions())
		}
	})

	t.Run("existing slices are left to the controller", func(t *testing.T) {
		client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
		if _, err := seedSlices(ctx, client, testDriver, testNode, resources); err != nil {
			t.Fatal(err)
		}
		client.ClearActions()
		if n, err := seedSlices(ctx, client, testDriver, testNode, resources); err != nil || n != 0 || sliceWrites(client) != 0 {
			t.Fatalf("second seed created %d slices (err %v)", n, err)
		}
	})

	t.Run("a failed seed is repaired by the controller", func(t *testing.T) {
		client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}})
		creates := 0
		client.PrependReactor("create", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
			creates++
			if creates == 3 {
				return true, nil, errors.New("injected create failure")
			}
			return false, nil, nil
		})
		if _, err := seedSlices(ctx, client, testDriver, testNode, resources); err == nil {
			t.Fatal("seed did not report the failed create")
		}
		runController(t, client, resources.DeepCopy())
		list, _ := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		got := map[string]int64{}
		generations := map[int64]bool{}
		for _, s := range list.Items {
			got[s.Name[:5]] = s.Spec.Pool.Generation
			generations[s.Spec.Pool.Generation] = true
		}
		if len(list.Items) != len(pool.Slices) || len(got) != len(pool.Slices) || len(generations) != 1 {
			t.Fatalf("after repair: %d slices, index -> generation %v; want %d slices of one generation", len(list.Items), got, len(pool.Slices))
		}
	})
}
