package v1beta1

import (
	"strings"
	"testing"
)

func TestDecodeAndValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		raw, wantErr string
	}{
		"minimal gpu":      {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`},
		"time slicing":     {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`},
		"mps":              {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`},
		"wrong apiVersion": {raw: `{"apiVersion":"resource.nvidia.com/v1","kind":"GpuConfig"}`, wantErr: "apiVersion"},
		"unknown kind":     {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"TpuConfig"}`, wantErr: `unknown kind "TpuConfig"`},
		"unknown field":    {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"threads":3}}}`, wantErr: `unknown field "sharing.mpsConfig.threads"`},
		"wrong type":       {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":7}}`, wantErr: "sharing.strategy"},
		"bad interval":     {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Eons"}}}`, wantErr: "sharing.timeSlicingConfig.interval"},
		"bad percentage":   {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":101}}}`, wantErr: "outside 1-100"},
		"no strategy":      {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{}}`, wantErr: "sharing.strategy: required"},
		"mixed strategies": {raw: `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","timeSlicingConfig":{}}}`, wantErr: "not allowed with strategy MPS"},
		"not json":         {raw: `apiVersion: x`, wantErr: "not a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Decode([]byte(tc.raw))
			if err == nil {
				cfg.Normalize()
				err = cfg.Validate()
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestNormalizeDefaultsInterval(t *testing.T) {
	cfg, err := Decode([]byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Normalize()
	if got := cfg.GetSharing().TimeSlicingConfig.Interval; got != DefaultTimeSlice {
		t.Fatalf("interval defaulted to %q", got)
	}
	if err := cfg.AppliesTo(MigDeviceType); err == nil || !strings.Contains(err.Error(), "MigDeviceConfig") {
		t.Fatalf("GpuConfig on a MIG device: %v", err)
	}
}
