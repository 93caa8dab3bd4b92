package driver

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

// seedSlices publishes a node's first ResourceSlices directly, before the
// kubelet plugin helper's resourceslice controller takes over.
//
// Why: the controller waits for its informer by polling once per second
// (dynamic-resource-allocation v0.37.0, Controller.initInformer), so on a
// new node nothing is schedulable for the first second. Seeding makes the
// devices visible within milliseconds of discovery.
//
// The seeded objects are exactly what the controller itself would create
// for a pool it has never published: its name prefix
// ("<index as %05x>-<driver>-<node>-"), pool generation 1, the slice count,
// the node as controlling owner. The controller therefore adopts them
// without an API call (TestSeededSlicesAdoptedWithoutWrites proves it
// against the real controller). If that contract ever drifted, the
// controller would simply replace the seeds: slower, never wrong.
//
// Seeding only happens when the node has no slice of this driver at all; a
// restarted plugin, or a second pod during a rolling update, leaves existing
// slices to the controller. It returns how many slices it created.
func seedSlices(ctx context.Context, client kubernetes.Interface, driverName, nodeName string, pool resourceslice.Pool) (int, error) {
	selector := fields.Set{resourceapi.ResourceSliceSelectorDriver: driverName, resourceapi.ResourceSliceSelectorNodeName: nodeName}.String()
	existing, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return 0, fmt.Errorf("list ResourceSlices: %w", err)
	}
	for _, s := range existing.Items {
		// Fake clients ignore field selectors; check again.
		if s.Spec.Driver == driverName && ptr.Deref(s.Spec.NodeName, "") == nodeName {
			return 0, nil
		}
	}
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get node for the slices' owner reference: %w", err)
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID, Controller: ptr.To(true)}
	count := len(pool.Slices)
	g, ctx := errgroup.WithContext(ctx)
	for i, s := range pool.Slices {
		slice := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName:    sliceNamePrefix(i, count, driverName, nodeName),
				OwnerReferences: []metav1.OwnerReference{owner},
			},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:                 driverName,
				Pool:                   resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: int64(count)},
				NodeName:               ptr.To(nodeName),
				Devices:                s.Devices,
				SharedCounters:         s.SharedCounters,
				PerDeviceNodeSelection: s.PerDeviceNodeSelection,
				PartitionTypeAttribute: s.PartitionTypeAttribute,
				SkipNodeOperations:     s.SkipNodeOperations,
			},
		}
		g.Go(func() error {
			_, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("create ResourceSlice: %w", err)
	}
	return count, nil
}

// sliceNamePrefix is the resourceslice controller's generateName for slice
// index i of count: the index in hex, at least five digits, so that the
// controller can match the slice to its position in the pool.
func sliceNamePrefix(i, count int, driverName, nodeName string) string {
	width := max(5, len(strconv.FormatInt(int64(count-1), 16)))
	return fmt.Sprintf("%0*x-%s-%s-", width, i, driverName, nodeName)
}
