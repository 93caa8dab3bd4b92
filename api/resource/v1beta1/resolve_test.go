// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"errors"
	"strings"
	"testing"
)

func timeSliced(interval TimeSliceInterval) *GpuConfig {
	c := DefaultGpuConfig()
	c.Sharing = &Sharing{Strategy: TimeSlicingStrategy, TimeSlicingConfig: &TimeSlicingConfig{Interval: interval}}
	return c
}

// TestResolvePrecedence: DeviceClass configs before claim configs, a
// later entry wins, a subrequest is selected by its parent's name.
func TestResolvePrecedence(t *testing.T) {
	configs := InPrecedenceOrder([]OpaqueConfig{
		// Claim configs listed first still override class configs.
		{Index: 0, Config: timeSliced(ShortTimeSlice)},
		{Index: 1, FromClass: true, Config: timeSliced(LongTimeSlice)},
		{Index: 2, Requests: []string{"train"}, Config: timeSliced(MediumTimeSlice)},
	})
	for request, want := range map[string]TimeSliceInterval{
		"infer":       ShortTimeSlice,  // claim-wide claim config beats the class config
		"train":       MediumTimeSlice, // the later, request-specific entry wins
		"train/small": MediumTimeSlice, // a subrequest matches its parent request
	} {
		chosen, err := configs.Resolve(request, WholeGPU)
		if err != nil || chosen == nil {
			t.Fatalf("request %s: %v, %v", request, chosen, err)
		}
		if got := chosen.Config.GetSharing().TimeSlicingConfig.Interval; got != want {
			t.Errorf("request %s: interval %q, want %q", request, got, want)
		}
	}
	if chosen, err := Configs(nil).Resolve("gpu", WholeGPU); chosen != nil || err != nil {
		t.Errorf("no configs: %v, %v; want nil, nil (the default applies)", chosen, err)
	}
	if chosen, _ := InPrecedenceOrder([]OpaqueConfig{{Requests: []string{"a"}, Config: DefaultGpuConfig()}}).Resolve("b", WholeGPU); chosen != nil {
		t.Errorf("a config for request a chosen for b")
	}
}

func TestResolveErrors(t *testing.T) {
	mig := InPrecedenceOrder([]OpaqueConfig{{Index: 3, Requests: []string{"gpu"}, Config: DefaultMigDeviceConfig()}})
	_, err := mig.Resolve("gpu", WholeGPU)
	var ce *ConfigError
	if !errors.As(err, &ce) || !ce.WrongKind || ce.Entry.Index != 3 ||
		err.Error() != `devices.config[3] (from claim) for request "gpu": kind MigDeviceConfig cannot configure a gpu device: use kind GpuConfig for whole GPUs` {
		t.Errorf("MigDeviceConfig on a GPU: %v", err)
	}
	if _, err := mig.Resolve("gpu", ""); err != nil {
		t.Errorf("unknown kind: %v; want the kind not checked", err)
	}
	for _, k := range []DeviceKind{MIG, DynamicMIG} {
		if _, err := mig.Resolve("gpu", k); err != nil {
			t.Errorf("MigDeviceConfig on %s: %v", k, err)
		}
	}
	bad := InPrecedenceOrder([]OpaqueConfig{{Index: 1, FromClass: true, Config: &GpuConfig{Sharing: &Sharing{Strategy: "Bogus"}}}})
	_, err = bad.Resolve("gpu", Monitor)
	if !errors.As(err, &ce) || ce.WrongKind || !strings.HasPrefix(err.Error(), "devices.config[1] (from DeviceClass): GpuConfig: ") {
		t.Errorf("invalid config: %v", err)
	}
}

func TestDeviceKind(t *testing.T) {
	for _, tc := range []struct {
		k                     DeviceKind
		mig                   bool
		configType, attribute string
		configKind            string
	}{
		{WholeGPU, false, "gpu", "gpu", GpuConfigKind},
		{MIG, true, "mig", "mig", MigDeviceConfigKind},
		{DynamicMIG, true, "mig", "mig", MigDeviceConfigKind},
		{Monitor, false, "gpu", "monitor", GpuConfigKind},
		{VFIO, false, "gpu", "vfio", GpuConfigKind},
	} {
		if tc.k.IsMIG() != tc.mig || string(tc.k.ConfigType()) != tc.configType || tc.k.Attribute() != tc.attribute ||
			tc.k.ConfigKind() != tc.configKind || DefaultConfigFor(tc.k).Kind() != tc.configKind {
			t.Errorf("%s: IsMIG %v, ConfigType %s, Attribute %s, ConfigKind %s", tc.k, tc.k.IsMIG(), tc.k.ConfigType(), tc.k.Attribute(), tc.k.ConfigKind())
		}
	}
}

// Sharing cannot apply to a GPU a VM owns; a plain GpuConfig can.
func TestGpuConfigOnVFIO(t *testing.T) {
	c := &GpuConfig{Sharing: &Sharing{Strategy: TimeSlicingStrategy}}
	if err := c.AppliesTo(VFIO); err == nil || !strings.Contains(err.Error(), "leave out sharing") {
		t.Fatalf("AppliesTo(VFIO) with sharing = %v", err)
	}
	if err := (&GpuConfig{}).AppliesTo(VFIO); err != nil {
		t.Fatal(err)
	}
	if err := c.AppliesTo(WholeGPU); err != nil {
		t.Fatal(err)
	}
}
