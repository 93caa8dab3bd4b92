package slices

import (
	"fmt"
	"io"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"
)

// Objects renders driver resources as the ResourceSlice objects the
// resourceslice controller would create for a node, with the names it
// would generate left as generateName prefixes.
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
				TypeMeta: metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
				ObjectMeta: metav1.ObjectMeta{
					GenerateName: fmt.Sprintf("%x-%s-%s-", i, nodeName, driverName),
				},
				Spec: resourceapi.ResourceSliceSpec{
					Driver:         driverName,
					NodeName:       &nodeName,
					Pool:           resourceapi.ResourcePool{Name: poolName, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
					Devices:        s.Devices,
					SharedCounters: s.SharedCounters,
				},
			})
		}
	}
	return out
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
