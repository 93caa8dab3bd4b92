// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

// DeviceStatusData is written into ResourceClaim.status.devices[].data for
// each prepared device. The write itself happens outside this package (see
// pkg/devicestatus), behind StatusReporter: prepare never calls the API.
type DeviceStatusData struct {
	UUID        string `json:"uuid"`
	ProductName string `json:"productName,omitempty"`
}
