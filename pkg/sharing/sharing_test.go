// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import "testing"

// MPS reads a limit of 0M as no limit at all, so a positive limit must never
// render as 0M. Validation rejects limits below 1Mi; this guards values that
// come from elsewhere, e.g. an old checkpoint record.
func TestMiBNeverRendersALimitAsZero(t *testing.T) {
	for bytes, want := range map[int64]string{
		1:               "1M",
		512 << 10:       "1M",
		1 << 20:         "1M",
		3<<20 + 512<<10: "3M", // rounds down: never more than was allowed
		20 << 30:        "20480M",
	} {
		if got := MiB(bytes); got != want {
			t.Errorf("MiB(%d) = %s, want %s", bytes, got, want)
		}
	}
}
