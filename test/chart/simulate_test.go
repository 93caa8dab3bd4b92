// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// badProfiles are simulate.profile values the plugin refuses for their
// form, which the schema must refuse too.
var badProfiles = []string{"h100x8:foo", "H100x8", "h100x8:MIG", "h100x8:mig:mig", "h100x8mig", "a100-80gb:migx4", "h100"}

// The README documents ":mig" for simulated GPUs whose admin turned MIG
// mode on; the chart must let it through to the plugin unchanged.
func TestChartSimulatedMIGModeProfile(t *testing.T) {
	for _, profile := range []string{"a100-40gbx8:mig", "a100-80gbx4:mig", "h100x8"} {
		c := plugin(t, render(t, "simulate.profile="+profile))
		if got, ok := env(c, "SIMULATE_PROFILE"); got != profile {
			t.Errorf("simulate.profile=%s: plugin's SIMULATE_PROFILE is %q (set: %v), want %q", profile, got, ok, profile)
		}
	}
}

// The schema still refuses malformed profiles, with an error naming the
// field.
func TestChartSchemaRefusesBadSimulateProfiles(t *testing.T) {
	for _, profile := range badProfiles {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2", "--set", "simulate.profile=" + profile}
		out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
		if err == nil {
			t.Errorf("simulate.profile=%s rendered", profile)
		} else if !strings.Contains(string(out), "profile") {
			t.Errorf("simulate.profile=%s: error does not name profile:\n%.400s", profile, out)
		}
	}
}

// The schema's pattern accepts every profile of every model that the
// plugin accepts (simulate.ParseProfile), with and without ":mig", and
// refuses the malformed ones the plugin refuses. The pattern is simple
// enough that Go's regexp reads it as JSON Schema's ECMA-262 does.
func TestChartSimulateProfilePatternMatchesThePlugin(t *testing.T) {
	var schema struct {
		Properties struct {
			Simulate struct {
				Properties struct {
					Profile struct {
						Pattern string `json:"pattern"`
					} `json:"profile"`
				} `json:"properties"`
			} `json:"simulate"`
		} `json:"properties"`
	}
	data, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(schema.Properties.Simulate.Properties.Profile.Pattern)
	if !pattern.MatchString("") {
		t.Errorf("pattern %s refuses the empty profile (real GPUs)", pattern)
	}
	for _, model := range simulate.ModelNames() {
		for _, count := range []int{1, simulate.MaxGPUs} {
			for _, suffix := range []string{"", simulate.MigSuffix} {
				profile := model + "x" + strconv.Itoa(count) + suffix
				if _, err := simulate.ParseProfile(profile); err != nil {
					t.Fatalf("the plugin refuses %s: %v", profile, err)
				}
				if !pattern.MatchString(profile) {
					t.Errorf("pattern %s refuses %s, which the plugin accepts", pattern, profile)
				}
			}
		}
	}
	for _, profile := range badProfiles {
		if _, err := simulate.ParseProfile(profile); err == nil {
			t.Fatalf("the plugin accepts %s", profile)
		}
		if pattern.MatchString(profile) {
			t.Errorf("pattern %s accepts %s, which the plugin refuses", pattern, profile)
		}
	}
}
