// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

// DeviceStatusData is written into ResourceClaim.status.devices[].data for
// each prepared device, for users and tools to read which device a claim
// got. pkg/devicestatus writes it in the background; prepare never calls
// the API. Fields are only ever added.
type DeviceStatusData struct {
	UUID        string `json:"uuid"`
	ProductName string `json:"productName,omitempty"`
}
