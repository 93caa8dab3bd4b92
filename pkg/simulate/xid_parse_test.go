// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func TestParseXIDFault(t *testing.T) {
	type parsed struct {
		eventType, value uint64
		gi, ci           uint32
	}
	for content, want := range map[string]*parsed{
		"79":           {nvml.EventTypeXidCriticalError, 79, NoInstance, NoInstance},
		" 79 \n":       {nvml.EventTypeXidCriticalError, 79, NoInstance, NoInstance},
		"ecc-dbe\n":    {nvml.EventTypeDoubleBitEccError, 0, NoInstance, NoInstance},
		"94 1 0":       {nvml.EventTypeXidCriticalError, 94, 1, 0},
		"ecc-dbe 2 3":  {nvml.EventTypeDoubleBitEccError, 0, 2, 3},
		"":             nil,
		"0":            nil,
		"-79":          nil,
		"seventy-nine": nil,
		"94 1":         nil, // a GPU instance without a compute instance
		"94 1 0 0":     nil,
		"94 a 0":       nil,
		"94 1 -1":      nil,
		"4294967296":   nil, // beyond NVML's 32-bit XIDs
	} {
		et, v, gi, ci, ok := parseXIDFault(content)
		switch {
		case want == nil && ok:
			t.Errorf("%q parsed as (%#x, %d, %d, %d), want it refused", content, et, v, gi, ci)
		case want != nil && (!ok || *want != parsed{et, v, gi, ci}):
			t.Errorf("%q = (%#x, %d, %d, %d, %v), want %+v", content, et, v, gi, ci, ok, *want)
		}
	}
}
