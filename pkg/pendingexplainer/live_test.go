// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// selecting is a fake clientset that applies the field selectors of
// ResourceSlice Lists, which the fake leaves to a server, and records
// them.
type selecting struct {
	*fake.Clientset
	mu        sync.Mutex
	selectors []string
	err       error // what the selected Lists fail with, when set
}

func newSelecting(objs ...runtime.Object) *selecting {
	c := &selecting{Clientset: fake.NewClientset(objs...)}
	c.PrependReactor("list", "resourceslices", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sel := a.(clienttesting.ListAction).GetListRestrictions().Fields
		if sel.Empty() {
			return false, nil, nil // the informer's
		}
		c.mu.Lock()
		c.selectors = append(c.selectors, sel.String())
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return true, nil, err
		}
		obj, err := c.Tracker().List(resourceapi.SchemeGroupVersion.WithResource("resourceslices"),
			resourceapi.SchemeGroupVersion.WithKind("ResourceSlice"), "")
		if err != nil {
			return true, nil, err
		}
		list := obj.(*resourceapi.ResourceSliceList)
		list.Items = slices.DeleteFunc(list.Items, func(s resourceapi.ResourceSlice) bool {
			return !sel.Matches(fields.Set{
				resourceapi.ResourceSliceSelectorNodeName: nodeOf(&s),
				resourceapi.ResourceSliceSelectorDriver:   s.Spec.Driver,
			})
		})
		return true, list, nil
	})
	return c
}

func (c *selecting) listed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.selectors)
}

// The tainted node publishes with dynamic MIG: its counters are in a
// slice without taints, which the cache holds as a stub. Without them GPU
// 1 could not be allocated at all, so the right Event needs the node's
// slices listed, once while they stay the same.
func TestExplainerListsStubbedSlices(t *testing.T) {
	c := defaults()
	c.dynamicMIG = true
	c.others, c.othersProfile = 1, "h100x2"
	objs := c.objects(t)
	for _, o := range objs {
		if s, ok := o.(*resourceapi.ResourceSlice); ok {
			s.ResourceVersion = "1"
		}
	}
	client := newSelecting(objs...)
	e, rec, clk := startClient(t, client.Clientset)
	all, err := e.slices.List(everything)
	if err != nil {
		t.Fatal(err)
	}
	var counters *resourceapi.ResourceSlice
	for _, s := range all {
		if nodeOf(s) == node && isStub(s) {
			counters = s
		}
	}
	if counters == nil {
		t.Fatal("the tainted node's counter slice is not a stub in the cache")
	}

	want := []string{"spec.nodeName=" + node}
	for i, step := range []string{"first look", "a minute later, nothing changed", "the counter slice changed"} {
		switch i {
		case 1:
			clk.SetTime(clk.Now().Add(time.Minute + time.Second))
		case 2:
			clk.SetTime(clk.Now().Add(time.Minute + time.Second))
			update(t, client, counters.Name)
			e.waitForVersion(t, counters.Name, "2")
			want = append(want, want[0])
		}
		syncPod(t, e)
		got := recorded(rec)
		if len(got) != 1 || !strings.Contains(got[0], wantDev) {
			t.Errorf("%s: events %q, want one naming %s", step, got, wantDev)
		}
		if got := client.listed(); !slices.Equal(got, want) {
			t.Errorf("%s: Lists with field selectors %q, want %q", step, got, want)
		}
	}

	// What the cache alone would conclude: the test above needs the List.
	pod, err := e.pods.Pods("ns").Get("p")
	if err != nil {
		t.Fatal(err)
	}
	sc := taintScope(driver, all)
	snap, err := e.snapshot(context.Background(), pod, all, sc)
	if err != nil {
		t.Fatal(err)
	}
	snap.Slices = inScope(all, sc.holds)
	if _, blocks := clusterview.TaintBlocked(snap, "ns", "p"); len(blocks) != 0 {
		t.Errorf("from the stubs alone: blocks %+v, want none (the test would not need the List)", blocks)
	}
}

// A List that fails posts nothing and fails the sync, which the queue
// retries.
func TestExplainerListFails(t *testing.T) {
	c := defaults()
	c.dynamicMIG = true
	client := newSelecting(c.objects(t)...)
	client.err = errors.New("apiserver unavailable")
	e, rec, _ := startClient(t, client.Clientset)
	if err := e.sync(context.Background(), podKey); err == nil || !strings.Contains(err.Error(), "apiserver unavailable") {
		t.Errorf("sync: %v, want the List's error", err)
	}
	if got := recorded(rec); len(got) != 0 {
		t.Errorf("events %q, want none", got)
	}
}

// A node-less pool in scope is listed by its driver and an empty
// spec.nodeName, and only its own slices are kept.
func TestSlicesInScopeNodelessPool(t *testing.T) {
	slice := func(name, pool, nodeName string, tainted bool) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 2}}}
		if nodeName != "" {
			s.Spec.NodeName = &nodeName
		} else {
			s.Spec.AllNodes = ptr(true)
		}
		d := resourceapi.Device{Name: "d-" + name}
		if tainted {
			d.Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoExecute}}
		}
		s.Spec.Devices = []resourceapi.Device{d}
		return s
	}
	objs := []runtime.Object{slice("fabric-0", "fabric", "", true), slice("fabric-1", "fabric", "", false),
		slice("switch-0", "switch", "", false), slice("a-0", "a", "a", false)}
	client := newSelecting(objs...)
	e := &Explainer{cfg: Config{DriverName: driver, Client: client.Clientset}}
	var all []*resourceapi.ResourceSlice
	for _, o := range objs {
		s, err := transform(driver)(o.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s.(*resourceapi.ResourceSlice))
	}
	got, err := e.slicesInScope(context.Background(), all, taintScope(driver, all))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		if isStub(&s) || len(s.Spec.Devices) != 1 {
			t.Errorf("slice %s: a stub, or not the listed one", s.Name)
		}
		names = append(names, s.Name)
	}
	slices.Sort(names)
	if want := []string{"fabric-0", "fabric-1"}; !slices.Equal(names, want) {
		t.Errorf("slices %q, want %q", names, want)
	}
	if got, want := client.listed(), []string{"spec.driver=" + driver + ",spec.nodeName="}; !slices.Equal(got, want) {
		t.Errorf("Lists with field selectors %q, want %q", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

// update gives a slice resourceVersion 2, as the API server would on any
// change.
func update(t *testing.T, client *selecting, name string) {
	t.Helper()
	api := client.ResourceV1().ResourceSlices()
	s, err := api.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.ResourceVersion = "2"
	if _, err := api.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *Explainer) waitForVersion(t *testing.T, name, rv string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s, err := e.slices.Get(name); err == nil && s.ResourceVersion == rv {
			return
		}
	}
	t.Fatalf("the cache did not see slice %s at resourceVersion %s", name, rv)
}
