// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

func whole(gpu string) checkpoint.PreparedDevice {
	return checkpoint.PreparedDevice{Pool: "n1", Device: "gpu-" + strings.ToLower(gpu[4:]), UUID: gpu}
}

func place(gpu string, start, size uint32) checkpoint.PreparedDevice {
	return checkpoint.PreparedDevice{Pool: "n1", Device: fmt.Sprintf("gpu-%s-mig-1g10gb-%d", strings.ToLower(gpu[4:]), start), Mig: &checkpoint.MigRecord{ParentUUID: gpu, Profile: "1g.10gb", Start: start, Size: size, Dynamic: true, GIID: -1, CIID: -1}}
}

func share(d checkpoint.PreparedDevice, id string) checkpoint.PreparedDevice {
	d.Shared, d.ShareID = true, id
	return d
}

func admin(d checkpoint.PreparedDevice) checkpoint.PreparedDevice {
	d.Shared, d.AdminAccess = true, true
	return d
}

func vm(gpu string) checkpoint.PreparedDevice {
	d := whole(gpu)
	d.Device += "-vfio"
	d.Vfio = &checkpoint.VfioRecord{PCIBusID: "0000:18:00.0", Driver: "vfio-pci"}
	return d
}

// Two devices conflict when they use the same hardware, read from the
// records alone: the GPU by UUID and a MIG device's memory slices.
func TestConflicts(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b checkpoint.PreparedDevice
		want bool
	}{
		{"whole GPU and itself", whole("GPU-0"), whole("GPU-0"), true},
		{"whole GPU and one of its MIG devices", whole("GPU-0"), place("GPU-0", 6, 1), true},
		{"MIG device and its whole GPU", place("GPU-0", 0, 1), whole("GPU-0"), true},
		{"other GPUs", whole("GPU-0"), whole("GPU-1"), false},
		{"MIG devices of other GPUs at one placement", place("GPU-0", 0, 4), place("GPU-1", 0, 4), false},
		{"adjacent placements", place("GPU-0", 0, 4), place("GPU-0", 4, 4), false},
		{"adjacent placements, reversed", place("GPU-0", 4, 4), place("GPU-0", 0, 4), false},
		{"nested placements", place("GPU-0", 0, 8), place("GPU-0", 3, 1), true},
		{"partly overlapping placements", place("GPU-0", 2, 2), place("GPU-0", 3, 2), true},
		{"same placement", place("GPU-0", 5, 1), place("GPU-0", 5, 1), true},
		{"MIG record without a size holds the GPU", place("GPU-0", 0, 0), place("GPU-0", 4, 1), true},
		{"two shares of one GPU", share(whole("GPU-0"), "a"), share(whole("GPU-0"), "b"), false},
		{"two shares of one MIG device", share(place("GPU-0", 0, 1), "a"), share(place("GPU-0", 0, 1), "b"), false},
		{"a share of the GPU and of its MIG device", share(whole("GPU-0"), "a"), share(place("GPU-0", 0, 1), "b"), true},
		{"a share and the whole GPU", share(whole("GPU-0"), "a"), whole("GPU-0"), true},
		{"admin access beside a workload", admin(whole("GPU-0")), whole("GPU-0"), false},
		{"admin access beside a MIG device", place("GPU-0", 0, 1), admin(whole("GPU-0")), false},
		{"a VM and admin access", vm("GPU-0"), admin(whole("GPU-0")), true},
		{"a VM and a MIG device", place("GPU-0", 0, 1), vm("GPU-0"), true},
		{"a VM and another GPU", vm("GPU-0"), whole("GPU-1"), false},
		{"an unknown GPU conflicts with nothing", checkpoint.PreparedDevice{Device: "a"}, checkpoint.PreparedDevice{Device: "b"}, false},
	} {
		if got := Of(tc.a).Conflicts(Of(tc.b)); got != tc.want {
			t.Errorf("%s: Conflicts = %v, want %v", tc.name, got, tc.want)
		}
		if got := Of(tc.b).Conflicts(Of(tc.a)); got != tc.want {
			t.Errorf("%s, reversed: Conflicts = %v, want %v", tc.name, got, tc.want)
		}
	}
}
