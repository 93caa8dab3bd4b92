// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// stubAnnotation marks a cached ResourceSlice whose devices and counters
// the explainer dropped on the way into its cache: without it a stub would
// look like a slice that publishes nothing (a pool's last slice emptied by
// its driver, say). It lives only in the cache; the explainer writes no
// ResourceSlice.
const stubAnnotation = "gpu.nvidia.com/pending-explainer-stub"

// stubAnnotations is shared by every stub: nothing writes to a cached
// object, and a map per slice would be a good part of a stub's size.
var stubAnnotations = map[string]string{stubAnnotation: "true"}

// transform is the informers' transform: trim, and stubs of the slices
// that put nothing in the taint scope. A node of eight H100s with dynamic
// MIG publishes ~1 MiB of devices in memory, so a cache of every slice
// would outgrow the webhook's memory limit at a few hundred nodes, while a
// diagnosis looks only at the few nodes with tainted GPUs (scope.go).
//
// Only slices with a NoSchedule or NoExecute taint of driver stay whole:
// they alone decide the scope, and stubs keep what scope.holds reads (the
// node, or the pool of a node-less slice). The rest of a node in scope,
// its untainted slices and other drivers' ones, is listed from the API
// server when a pod is diagnosed (live.go); keeping other drivers' tainted
// slices whole would only pay for nodes outside the scope.
//
// A stub of a stub is the same stub: the cache may hand transformed
// objects back to the transform.
func transform(driver string) cache.TransformFunc {
	return func(obj any) (any, error) {
		obj, err := trim(obj)
		if err != nil {
			return nil, err
		}
		if s, ok := obj.(*resourceapi.ResourceSlice); ok && !(s.Spec.Driver == driver && anyTaint(s)) {
			return stub(s), nil
		}
		return obj, nil
	}
}

// stub is a fresh object rather than s cut down, so that none of s's
// backing arrays stay reachable.
func stub(s *resourceapi.ResourceSlice) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:            s.Name,
			UID:             s.UID,
			ResourceVersion: s.ResourceVersion,
			Generation:      s.Generation,
			Annotations:     stubAnnotations,
		},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:                 s.Spec.Driver,
			Pool:                   s.Spec.Pool,
			NodeName:               s.Spec.NodeName,
			NodeSelector:           s.Spec.NodeSelector,
			AllNodes:               s.Spec.AllNodes,
			PerDeviceNodeSelection: s.Spec.PerDeviceNodeSelection,
		},
	}
}

func isStub(s *resourceapi.ResourceSlice) bool { return s.Annotations[stubAnnotation] != "" }
