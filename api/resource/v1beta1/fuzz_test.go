// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// FuzzDecodeConfig runs Decode, Normalize and Validate on arbitrary input, as
// the prepare path does on a claim's opaque config. The seed corpus lives in
// testdata/fuzz/FuzzDecodeConfig and runs with every `go test`; `make fuzz`
// explores further. Invariants: nothing panics, errors show no decoder
// internals, and a config that validates means exactly what it says: no
// limit that MPS would read as "no limit", no unknown interval or strategy.
func FuzzDecodeConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := Decode(raw)
		if err != nil {
			checkErrorText(t, raw, err)
			return
		}
		cfg.Normalize()
		if err := cfg.Validate(); err != nil {
			checkErrorText(t, raw, err)
			return
		}
		checkMeaningful(t, cfg)
		// What validated survives a round trip: the prepare path may store
		// and re-read a config.
		again, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal a valid config: %v", err)
		}
		cfg2, err := Decode(again)
		if err == nil {
			cfg2.Normalize()
			err = cfg2.Validate()
		}
		if err != nil {
			t.Fatalf("valid config %s does not decode again from %s: %v", raw, again, err)
		}
	})
}

func checkErrorText(t *testing.T, raw []byte, err error) {
	t.Helper()
	for _, leak := range []string{"json: cannot unmarshal", "Go struct field", "regular expression"} {
		// The error may quote the user's own text.
		if strings.Contains(err.Error(), leak) && !bytes.Contains(raw, []byte(leak)) {
			t.Fatalf("error %q shows decoder internals (%q) for %s", err, leak, raw)
		}
	}
}

func checkMeaningful(t *testing.T, cfg Config) {
	t.Helper()
	s := cfg.GetSharing()
	if s == nil {
		return
	}
	switch s.Strategy {
	case TimeSlicingStrategy:
		if s.TimeSlicingConfig == nil || s.MpsConfig != nil {
			t.Fatalf("time-slicing config %+v", s)
		}
		switch s.TimeSlicingConfig.Interval {
		case DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice:
		default:
			t.Fatalf("valid config with interval %q", s.TimeSlicingConfig.Interval)
		}
	case MpsStrategy:
		m := s.MpsConfig
		if m == nil || s.TimeSlicingConfig != nil {
			t.Fatalf("MPS config %+v", s)
		}
		if p := m.DefaultActiveThreadPercentage; p != nil && (*p < 1 || *p > 100) {
			t.Fatalf("valid config with thread percentage %d", *p)
		}
		if q := m.DefaultPinnedDeviceMemoryLimit; q != nil {
			checkLimit(t, "defaultPinnedDeviceMemoryLimit", *q)
		}
		for key, q := range m.DefaultPerDevicePinnedMemoryLimit {
			if key == "" {
				t.Fatalf("valid config with an empty per-device key")
			}
			checkLimit(t, "defaultPerDevicePinnedMemoryLimit["+key+"]", q)
		}
	default:
		t.Fatalf("valid config with strategy %q", s.Strategy)
	}
}

// checkLimit: the bytes handed to MPS are at least 1Mi and at least what
// was written (Value rounds up; an overflow would wrap below it).
func checkLimit(t *testing.T, field string, q resource.Quantity) {
	t.Helper()
	v := q.Value()
	if v < MinPinnedMemoryLimit || v == math.MaxInt64 || resource.NewQuantity(v, resource.BinarySI).Cmp(q) < 0 {
		t.Fatalf("valid config: %s %s becomes %d bytes", field, q.String(), v)
	}
}
