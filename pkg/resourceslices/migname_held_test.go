// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// TestHeldLegacyMigNamesStayCounted: a claim allocated before the upgrade
// holds "gpu-0-mig-3g40gb-4", a name the node no longer publishes on its
// own. The allocator counts what an allocated device consumes only while
// the device is published, so without it the placement (and the whole GPU)
// looks free; published again under the held name, beside its current
// name and consuming the same counters, it keeps both from other claims.
func TestHeldLegacyMigNamesStayCounted(t *testing.T) {
	const legacy = "gpu-0-mig-3g40gb-4"
	inv := simulatedInventory(t, "h100x1")
	held := resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "mig", Driver: driverName, Pool: "n1", Device: legacy}}}}
	allocate := func(o resourceslices.Options, claim *resourceapi.ResourceClaim) []string {
		t.Helper()
		res := resourceslices.Build("n1", inv, o)
		if err := resourceslices.Validate(res); err != nil {
			t.Fatal(err)
		}
		c := schedtest.New(t, driverName, "n1", res)
		state := allocator.NewState()
		schedtest.Hold(state, &held)
		alloc, err := allocator.New(context.Background(), c, state, c.Converted(), schedtest.NewCELCache())
		if err != nil {
			t.Fatal(err)
		}
		results, err := alloc.Allocate(context.Background(), c.Node, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			t.Fatal(err)
		}
		if len(results) == 0 {
			return nil
		}
		return schedtest.Devices(&results[0])
	}
	whole := func() *resourceapi.ResourceClaim {
		return schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1))
	}
	big := func() *resourceapi.ResourceClaim {
		return schedtest.Claim("big", schedtest.Request("mig", "mig.nvidia.com", 2, "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"))
	}
	plain := resourceslices.Options{DynamicMIG: true}
	if got := allocate(plain, whole()); got == nil {
		t.Fatal("the hazard this guards against is gone: with the held device unpublished, the whole GPU is still not allocatable")
	}
	withHeld := plain
	withHeld.HeldLegacyMigNames = map[string]string{legacy: inv.GPUs[0].UUID}
	if got := allocate(withHeld, whole()); got != nil {
		t.Errorf("whole GPU allocated as %v beside the held %s", got, legacy)
	}
	if got := allocate(withHeld, big()); got != nil {
		t.Errorf("two 3g.40gb allocated as %v beside the held %s", got, legacy)
	}
	one := schedtest.Claim("one", schedtest.Request("mig", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"))
	if got := allocate(withHeld, one); !slices.Equal(got, []string{"gpu-0-mig-3g40gb-9-0"}) {
		t.Errorf("the free 3g.40gb allocated as %v, want gpu-0-mig-3g40gb-9-0", got)
	}

	// The held name is the current device's copy under its older name,
	// published after every other device of the GPU, and only while held.
	table := resourceslices.NewTable(inv, withHeld)
	var names []string
	byName := map[string]resourceslices.Entry{}
	for _, e := range table.Entries {
		if !deviceattr.IsMonitorDeviceName(e.Device.Name) {
			names = append(names, e.Device.Name)
		}
		byName[e.Device.Name] = e
	}
	if names[len(names)-1] != legacy {
		t.Errorf("published %v, want %s last", names, legacy)
	}
	current, old := byName["gpu-0-mig-3g40gb-9-4"], byName[legacy]
	old.Device.Name = current.Device.Name
	if !reflect.DeepEqual(old, current) {
		t.Errorf("%s is not gpu-0-mig-3g40gb-9-4 under another name:\n%+v\n%+v", legacy, old, current)
	}
	if n := len(resourceslices.NewTable(inv, plain).Entries); n != len(table.Entries)-1 {
		t.Errorf("%d devices without the held name, %d with it", n, len(table.Entries))
	}
	// Held on another GPU (its minor was this one's before a renumbering):
	// the name means another device here, and is not published.
	other := plain
	other.HeldLegacyMigNames = map[string]string{legacy: "GPU-elsewhere"}
	if n := len(resourceslices.NewTable(inv, other).Entries); n != len(table.Entries)-1 {
		t.Errorf("%s held on another GPU is published here", legacy)
	}
}
