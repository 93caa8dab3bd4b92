// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sharing applies GPU sharing to prepared devices: time-slicing
// (the scheduler time slice of a GPU) and MPS (a control daemon per shared
// device, with per-client thread and pinned-memory limits). It knows
// nothing about claims; prepare decides what to apply and when the last
// user is gone.
package sharing

import (
	"fmt"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// Settings is what is applied to one device for one claim.
type Settings struct {
	Strategy configapi.SharingStrategy
	// Interval is set for time-slicing.
	Interval configapi.TimeSliceInterval `json:"interval,omitempty"`
	// ActiveThreadPercentage and PinnedMemoryBytes are MPS client limits;
	// zero means unlimited.
	ActiveThreadPercentage int   `json:"activeThreadPercentage,omitempty"`
	PinnedMemoryBytes      int64 `json:"pinnedMemoryBytes,omitempty"`
}

// TimeSlicer sets a GPU's scheduler time slice.
type TimeSlicer interface {
	SetTimeSlice(uuid string, interval configapi.TimeSliceInterval) error
}

// TimeSliceValue is the value nvidia-smi compute-policy --set-timeslice takes.
func TimeSliceValue(i configapi.TimeSliceInterval) (int, error) {
	switch i {
	case configapi.DefaultTimeSlice, "":
		return 0, nil
	case configapi.ShortTimeSlice:
		return 1, nil
	case configapi.MediumTimeSlice:
		return 2, nil
	case configapi.LongTimeSlice:
		return 3, nil
	}
	return 0, fmt.Errorf("unknown time slice interval %q", i)
}

// MiB renders bytes as MPS expects memory limits: whole MiB, rounded down so
// a client never gets more than it was allowed. MPS reads 0M as no limit, so
// a positive limit below 1Mi renders as 1M. Config validation rejects such
// limits; this only guards values from elsewhere (an old record).
func MiB(bytes int64) string {
	if bytes > 0 && bytes < 1<<20 {
		return "1M"
	}
	return fmt.Sprintf("%dM", bytes>>20)
}
