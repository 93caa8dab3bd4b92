// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// timeSlicedShare resolves one share of a GPU offered for integer or
// unlimited consumable shares (NVIDIA's --consumable-shares=<N> and
// unlimited; pkg/resourceslices/consumable.go). Such a share has no memory
// size to enforce (it consumes none unless asked, and a share count is no
// amount of anything the GPU can limit), so its processes take turns on
// the whole GPU: it is time-sliced, at the interval its config asks for
// or Default. The time slice belongs to the GPU, so every share on it must
// ask for the same one (timeSliceConflict), which is NVIDIA's rule too:
// its prepare refuses a claim whose config differs from the config of a
// claim already prepared on the device (cmd/gpu-kubelet-plugin
// device_state.go at 95932046).
//
// MPS is refused, as NVIDIA's prepare refuses it with consumable shares
// ("MPS sharing is not supported when consumable shares is enabled",
// same file): the GPU's other shares are no MPS clients, so MPS limits
// would bind this claim alone while the others use the GPU unlimited.
// Shares that MPS enforces are what mode memory offers.
func (s *State) timeSlicedShare(sh *configapi.Sharing, dev *AllocatableDevice) (*checkpoint.SharingRecord, error) {
	interval := configapi.DefaultTimeSlice
	if sh != nil {
		if sh.Strategy != configapi.TimeSlicingStrategy {
			return nil, fmt.Errorf("sharing.strategy: %s cannot run on a share of GPU %s: this node offers it for consumable shares in mode %s (chart value sharing.consumableShares.mode), whose shares are time-sliced, so MPS limits would bind this claim alone; leave sharing out or set strategy: TimeSlicing, or have an admin offer the GPU in mode memory, whose shares run under MPS",
				sh.Strategy, dev.GPU.UUID, dev.TimeSlicedShares)
		}
		if err := s.checkAllowed(sh.Strategy, false); err != nil {
			return nil, err
		}
		if sh.TimeSlicingConfig != nil {
			interval = sh.TimeSlicingConfig.Interval
		}
	}
	if s.Sharing == nil {
		// Nothing to apply with: a State without sharing (tests) prepares
		// the share as the GPU is.
		return nil, nil
	}
	return &checkpoint.SharingRecord{Strategy: configapi.TimeSlicingStrategy, Target: dev.GPU.UUID, Interval: interval}, nil
}
