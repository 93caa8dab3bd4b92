// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import "testing"

// TestStopLetsGoOfNVML: once Stop returns, the health monitor no longer
// uses NVML, so a caller may shut NVML down. On an H100 (driver
// 580.159.04) gpudra smoke prepare crashed in nvmlEventSetFree when the
// monitor outlived Stop and NVML was shut down under it.
func TestStopLetsGoOfNVML(t *testing.T) {
	n := newNode(t, "h100x1")
	d := n.driver
	n.stop()
	select {
	case <-d.healthDone:
	default:
		t.Fatal("the health monitor still runs after Stop")
	}
}
