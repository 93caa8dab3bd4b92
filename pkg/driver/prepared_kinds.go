// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
)

// preparedByKind counts the devices of completed claims by kind, the
// devices ledger.View.PreparedDevices counts: pkg/metrics exports their sum
// and, by NVIDIA's device type, nvidia_dra_prepared_devices.
func preparedByKind(v ledger.View) map[configapi.DeviceKind]int {
	n := map[configapi.DeviceKind]int{}
	for _, rec := range v.Records() {
		if rec.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range rec.Devices {
			n[devkind.KindOf(d)]++
		}
	}
	return n
}
