// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// Only this driver's slices with a NoSchedule or NoExecute taint stay
// whole; every other slice keeps what places it (node or pool) and its
// version, and is marked.
func TestTransform(t *testing.T) {
	slice := func(drv string, effect resourceapi.DeviceTaintEffect) *resourceapi.ResourceSlice {
		n := "n"
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "uid-s", ResourceVersion: "42", Generation: 3, Labels: map[string]string{"l": "v"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
			Spec: resourceapi.ResourceSliceSpec{Driver: drv, Pool: resourceapi.ResourcePool{Name: "p", Generation: 2, ResourceSliceCount: 5}, NodeName: &n,
				SharedCounters: []resourceapi.CounterSet{{Name: "c"}}, Devices: []resourceapi.Device{{Name: "d0"}, {Name: "d1"}}},
		}
		if effect != "" {
			s.Spec.Devices[1].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: effect}}
		}
		return s
	}
	tr := transform(driver)
	for _, tc := range []struct {
		name  string
		in    *resourceapi.ResourceSlice
		whole bool
	}{
		{"NoSchedule", slice(driver, resourceapi.DeviceTaintEffectNoSchedule), true},
		{"NoExecute", slice(driver, resourceapi.DeviceTaintEffectNoExecute), true},
		{"untainted", slice(driver, ""), false},
		{"effect None", slice(driver, resourceapi.DeviceTaintEffectNone), false},
		{"another driver's taint", slice(other, resourceapi.DeviceTaintEffectNoSchedule), false},
		{"node-less", func() *resourceapi.ResourceSlice {
			s := slice(driver, "")
			s.Spec.NodeName, s.Spec.NodeSelector = nil, &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
			return s
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.in.DeepCopy()
			obj, err := tr(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := obj.(*resourceapi.ResourceSlice)
			if got.ManagedFields != nil {
				t.Error("managed fields kept")
			}
			if tc.whole {
				if isStub(got) || len(got.Spec.Devices) != 2 || len(got.Spec.SharedCounters) != 1 || got.Labels["l"] != "v" {
					t.Errorf("tainted slice not kept whole: %+v", got)
				}
				return
			}
			if !isStub(got) || got.Spec.Devices != nil || got.Spec.SharedCounters != nil || got.Labels != nil {
				t.Errorf("not a stub: %+v", got)
			}
			if got.Name != want.Name || got.UID != want.UID || got.ResourceVersion != want.ResourceVersion || got.Generation != want.Generation ||
				got.Spec.Driver != want.Spec.Driver || got.Spec.Pool != want.Spec.Pool || nodeOf(got) != nodeOf(want) ||
				(got.Spec.NodeSelector == nil) != (want.Spec.NodeSelector == nil) {
				t.Errorf("stub %+v lost what places the slice, want the metadata and spec of %+v", got, want)
			}
			again, err := tr(got)
			if err != nil || again.(*resourceapi.ResourceSlice).Name != got.Name || !isStub(again.(*resourceapi.ResourceSlice)) {
				t.Errorf("a stub transformed again: %+v, %v", again, err)
			}
		})
	}
	if isStub(&resourceapi.ResourceSlice{}) {
		t.Error("an empty slice counts as a stub")
	}
}

// BenchmarkSliceCacheMemory is the heap the slice cache keeps per node of
// eight H100s published with dynamic MIG (5 slices, 216 devices), decoded
// as from the API server: every slice whole (the cache before stubs), and
// with the explainer's transform when no device is tainted.
func BenchmarkSliceCacheMemory(b *testing.B) {
	const nodes = 20
	_, inv, err := simulate.Discover("h100x8", "n", filepath.Join(b.TempDir(), "sim"))
	if err != nil {
		b.Fatal(err)
	}
	var wire [][]byte
	for _, s := range resourceslices.Objects(driver, "n", resourceslices.Build("n", inv, resourceslices.Options{DynamicMIG: true})) {
		j, err := json.Marshal(s)
		if err != nil {
			b.Fatal(err)
		}
		wire = append(wire, j)
	}
	for _, tc := range []struct {
		name string
		tf   cache.TransformFunc
	}{{"cache=whole", trim}, {"cache=stubs", transform(driver)}} {
		b.Run(tc.name, func(b *testing.B) {
			var held int64
			runs := 0
			for b.Loop() {
				held += heapHeld(func() any { return fill(b, wire, nodes, tc.tf) })
				runs++
			}
			b.ReportMetric(float64(held)/float64(runs*nodes), "B/node")
		})
	}
}

// heapHeld is the live heap that what build returns keeps.
func heapHeld(build func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// fill is an informer's store of the slices of nodes copies of a node,
// each decoded afresh, as a List or watch event would be.
func fill(b *testing.B, wire [][]byte, nodes int, tf cache.TransformFunc) cache.Indexer {
	store := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range nodes {
		name := fmt.Sprintf("node-%03d", i)
		for j, w := range wire {
			s := &resourceapi.ResourceSlice{}
			if err := json.Unmarshal(w, s); err != nil {
				b.Fatal(err)
			}
			s.Name, s.Spec.NodeName, s.Spec.Pool.Name = fmt.Sprintf("%s-%s-%d", name, driver, j), &name, name
			s.UID, s.ResourceVersion = types.UID(fmt.Sprintf("0b6c2a4e-%04d-4f0e-9d1a-%012d", j, i)), fmt.Sprint(1000000+i*10+j)
			obj, err := tf(s)
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Add(obj); err != nil {
				b.Fatal(err)
			}
		}
	}
	return store
}
