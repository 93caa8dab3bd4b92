// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package step

import (
	"errors"
	"fmt"
	"testing"
)

func TestWrapAndParse(t *testing.T) {
	cause := errors.New("create 1g.10gb GPU instance at slice 3: Insufficient Resources")
	err := Errorf(MIG, "device gpu-0-mig-1g10gb-19-3: %w", cause)
	const text = "prepare step mig: device gpu-0-mig-1g10gb-19-3: create 1g.10gb GPU instance at slice 3: Insufficient Resources"
	if err.Error() != text {
		t.Fatalf("message %q, want %q", err, text)
	}
	if !errors.Is(err, cause) {
		t.Error("the cause is lost")
	}
	// An outer step does not replace the inner one, nor add a marker.
	wrapped := fmt.Errorf("prepare claim ns/c: %w", Wrap(Restore, err))
	if s, ok := Of(wrapped); !ok || s != MIG {
		t.Errorf("Of = %q, %v; want mig", s, ok)
	}
	event := "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim c: " + wrapped.Error()
	s, detail, ok := Parse(event)
	if !ok || s != MIG || detail != "device gpu-0-mig-1g10gb-19-3: create 1g.10gb GPU instance at slice 3: Insufficient Resources" {
		t.Errorf("Parse = %q, %q, %v", s, detail, ok)
	}
	if Wrap(Config, nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		msg, step, detail string
		ok                bool
	}{
		{"prepare step config: devices.config[0]: bad", "config", "devices.config[0]: bad", true},
		{"x: prepare step future-step: something", "future-step", "something", true},
		{"prepare claim ns/c: device gpu-0: no longer published", "", "", false},
		{"prepare step : empty", "", "", false},
		{"prepare step Config: upper case", "", "", false},
		{"", "", "", false},
	} {
		s, detail, ok := Parse(tc.msg)
		if string(s) != tc.step || detail != tc.detail || ok != tc.ok {
			t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q, %v", tc.msg, s, detail, ok, tc.step, tc.detail, tc.ok)
		}
	}
	for _, s := range All {
		if !s.Known() {
			t.Errorf("%s not known", s)
		}
		if got, _, ok := Parse(Wrap(s, errors.New("x")).Error()); !ok || got != s {
			t.Errorf("step %s does not parse back: %q", s, got)
		}
	}
	if Step("future").Known() {
		t.Error("unknown step known")
	}
}
