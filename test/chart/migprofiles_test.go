// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// kubeletPlugin.migProfiles is passed as --mig-profiles only when set: the
// default publishes every profile, as the plugin does without the flag.
func TestChartMigProfilesValue(t *testing.T) {
	if v, ok := flag(plugin(t, render(t)), "--mig-profiles"); ok {
		t.Fatalf("default values pass --mig-profiles=%s", v)
	}
	c := plugin(t, render(t, "kubeletPlugin.migProfiles={1g.10gb,1g.10gb+me,7g.80gb}"))
	if v, _ := flag(c, "--mig-profiles"); v != "1g.10gb,1g.10gb+me,7g.80gb" {
		t.Fatalf("--mig-profiles=%q", v)
	}
}

// The schema takes every profile name the driver discovers on a simulated
// model (the plugin's own check, internal/plugincmd/migprofiles.go,
// has the same pattern) and refuses other names before anything is
// installed.
func TestChartMigProfilesSchema(t *testing.T) {
	var all []string
	for _, names := range driverProfiles(t) {
		all = append(all, names...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	set := "kubeletPlugin.migProfiles={" + strings.Join(all, ",") + "}"
	if v, _ := flag(plugin(t, render(t, set)), "--mig-profiles"); v != strings.Join(all, ",") {
		t.Fatalf("--mig-profiles=%q", v)
	}
	for _, bad := range []string{"{1g10gb}", "{nvidia.com/mig-1g.10gb}", "{1g.10gb,1g.10gb}"} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2", "--set", "kubeletPlugin.migProfiles=" + bad}
		if out, err := exec.Command(helmBinary(t), args...).CombinedOutput(); err == nil {
			t.Errorf("migProfiles=%s rendered:\n%.300s", bad, out)
		}
	}
}
