// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import (
	"fmt"
	"io"
	"sort"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"
)

// Objects renders driver resources as the ResourceSlice objects the
// resourceslice controller (dynamic-resource-allocation v0.37.0) creates for
// a pool it has never published: its generateName prefixes, pool generation
// 1, the slice count. Owner references are left to the caller. The plugin
// creates exactly these to publish a new node's slices early (pkg/driver);
// --print-slices prints them.
func Objects(driverName, nodeName string, res resourceslice.DriverResources) []resourceapi.ResourceSlice {
	poolNames := make([]string, 0, len(res.Pools))
	for name := range res.Pools {
		poolNames = append(poolNames, name)
	}
	sort.Strings(poolNames)
	var out []resourceapi.ResourceSlice
	for _, poolName := range poolNames {
		pool := res.Pools[poolName]
		for i, s := range pool.Slices {
			out = append(out, resourceapi.ResourceSlice{
				TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
				ObjectMeta: metav1.ObjectMeta{GenerateName: generateName(i, len(pool.Slices), driverName, nodeName)},
				Spec: resourceapi.ResourceSliceSpec{
					Driver:                 driverName,
					NodeName:               &nodeName,
					Pool:                   resourceapi.ResourcePool{Name: poolName, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
					Devices:                s.Devices,
					SharedCounters:         s.SharedCounters,
					PerDeviceNodeSelection: s.PerDeviceNodeSelection,
					PartitionTypeAttribute: s.PartitionTypeAttribute,
					SkipNodeOperations:     s.SkipNodeOperations,
				},
			})
		}
	}
	return out
}

// generateName is the controller's name prefix for slice i of count: the
// index in hex, at least five digits, by which it matches a slice to its
// position in the pool.
func generateName(i, count int, driverName, nodeName string) string {
	width := max(5, len(strconv.FormatInt(int64(count-1), 16)))
	return fmt.Sprintf("%0*x-%s-%s-", width, i, driverName, nodeName)
}

// CompletePool reports whether items, the slices of one pool, are all the
// slices the pool announces.
func CompletePool(items []resourceapi.ResourceSlice) bool {
	return len(items) > 0 && int64(len(items)) == items[0].Spec.Pool.ResourceSliceCount
}

// PrintYAML writes the slices as a multi-document YAML stream.
func PrintYAML(w io.Writer, objs []resourceapi.ResourceSlice) error {
	for _, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}
