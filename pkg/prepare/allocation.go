// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// A claim UID alone does not identify what was prepared: a claim can be
// deallocated and allocated again (other devices, same UID) while an
// unprepare is missed, e.g. with the plugin down. A record answers a
// prepare, and survives the stale check, only when it was made for the
// allocation the claim has now.

// allocationKey identifies one allocated device of this driver.
func allocationKey(requests []string, pool, device, shareID string, admin bool) string {
	flag := ""
	if admin {
		flag = "admin"
	}
	return strings.Join([]string{strings.Join(requests, ","), pool, device, shareID, flag}, "\x00")
}

// recordedKeys are the allocation keys of a record's devices, sorted.
func recordedKeys(devs []checkpoint.PreparedDevice) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		out = append(out, allocationKey(d.Requests, d.Pool, d.Device, d.ShareID, d.AdminAccess))
	}
	slices.Sort(out)
	return out
}

// allocatedAsRecorded reports whether the claim's current allocation, as
// far as this driver's devices go, is the one the record was made for.
func (s *State) allocatedAsRecorded(claim *resourceapi.ResourceClaim, rec checkpoint.PreparedClaim) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	var now []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != s.DriverName {
			continue
		}
		shareID := ""
		if r.ShareID != nil {
			shareID = string(*r.ShareID)
		}
		now = append(now, allocationKey([]string{r.Request}, r.Pool, r.Device, shareID, r.AdminAccess != nil && *r.AdminAccess))
	}
	slices.Sort(now)
	return slices.Equal(now, recordedKeys(rec.Devices))
}

// sameAllocation reports whether two records hold the same devices.
func sameAllocation(a, b []checkpoint.PreparedDevice) bool {
	return slices.Equal(recordedKeys(a), recordedKeys(b))
}
