// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"sigs.k8s.io/yaml"
)

const kueueConfigFile = "../../docs/examples/kueue-config.yaml"

// kueueConfig is the part of Kueue's manager Configuration the file sets
// (sigs.k8s.io/kueue v0.17.0 apis/config/v1beta2/configuration_types.go:
// Configuration.FeatureGates, Resources.DeviceClassMappings, DeviceClassMapping
// {Name, DeviceClassNames}); decoded strictly, so a misspelt field fails.
type kueueConfig struct {
	APIVersion   string          `json:"apiVersion"`
	Kind         string          `json:"kind"`
	FeatureGates map[string]bool `json:"featureGates"`
	Resources    struct {
		DeviceClassMappings []struct {
			Name             string   `json:"name"`
			DeviceClassNames []string `json:"deviceClassNames"`
		} `json:"deviceClassMappings"`
	} `json:"resources"`
}

// Kueue refuses a claim request with adminAccess (pkg/dra/claims.go
// countDevicesPerClass), and the monitor class is for nothing else.
const monitorClass = "monitor.gpu.nvidia.com"

func TestKueueConfigMapsEveryDeviceClass(t *testing.T) {
	b, err := os.ReadFile(kueueConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg kueueConfig
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		t.Fatalf("%s: %v", kueueConfigFile, err)
	}
	if cfg.APIVersion != "config.kueue.x-k8s.io/v1beta2" || cfg.Kind != "Configuration" {
		t.Errorf("%s is %s %s, want config.kueue.x-k8s.io/v1beta2 Configuration", kueueConfigFile, cfg.APIVersion, cfg.Kind)
	}
	// Alpha and off by default in v0.17 (pkg/features/kube_features.go).
	if !cfg.FeatureGates["DynamicResourceAllocation"] {
		t.Error("featureGates.DynamicResourceAllocation is not true")
	}

	// Kueue's own limits (pkg/config/validation.go validateDeviceClassMappings).
	mappings := cfg.Resources.DeviceClassMappings
	if len(mappings) > 16 {
		t.Errorf("%d deviceClassMappings, Kueue takes at most 16", len(mappings))
	}
	mapped := map[string]string{}
	for _, m := range mappings {
		if errs := content.IsLabelKey(m.Name); len(errs) > 0 {
			t.Errorf("mapping name %q: %v", m.Name, errs)
		}
		if n := len(m.DeviceClassNames); n == 0 || n > 8 {
			t.Errorf("mapping %s has %d deviceClassNames, Kueue takes 1 to 8", m.Name, n)
		}
		for _, dc := range m.DeviceClassNames {
			if errs := content.IsLabelKey(dc); len(errs) > 0 {
				t.Errorf("mapping %s: class %q: %v", m.Name, dc, errs)
			}
			if other, ok := mapped[dc]; ok {
				t.Errorf("class %s is mapped to %s and %s", dc, other, m.Name)
			}
			mapped[dc] = m.Name
		}
	}

	// Exactly the chart's classes, the monitor class aside; a MIG profile
	// class is charged on its compute slices (mig-<N>g.<mem>... to
	// nvidia.com/mig-<N>g or nvidia.com/mig-<N>g-large).
	rendered := map[string]bool{}
	for _, o := range helmObjects(t, "gpu-dra-driver", chartDir, "--kube-version", "v1.37.2") {
		if o.Kind == "DeviceClass" {
			rendered[o.Metadata.Name] = true
		}
	}
	if !rendered[monitorClass] {
		t.Errorf("the chart renders no %s; drop its exception here", monitorClass)
	}
	profile := regexp.MustCompile(`^mig-([0-9]+g)\.`)
	for dc := range rendered {
		name, ok := mapped[dc]
		switch {
		case dc == monitorClass:
			if ok {
				t.Errorf("%s is mapped, but Kueue refuses its admin-access requests", dc)
			}
		case !ok:
			t.Errorf("DeviceClass %s is not in %s: Kueue refuses pods that claim it", dc, kueueConfigFile)
		case profile.MatchString(dc):
			g := profile.FindStringSubmatch(dc)[1]
			if name != "nvidia.com/mig-"+g && name != "nvidia.com/mig-"+g+"-large" {
				t.Errorf("%s is charged on %s, want nvidia.com/mig-%s[-large]", dc, name, g)
			}
		}
	}
	for dc := range mapped {
		if !rendered[dc] {
			t.Errorf("%s maps %s, which the chart does not install", kueueConfigFile, dc)
		}
	}

	// docs/claims.md names every quota resource.
	doc, err := os.ReadFile("../../docs/claims.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Quotas with Kueue\n")
	if !ok {
		t.Fatal(`docs/claims.md has no section "## Quotas with Kueue"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("\\| `(nvidia\\.com/[^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		names = append(names, m[1])
	}
	var want []string
	for _, m := range mappings {
		want = append(want, m.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("docs/claims.md's Kueue table lists %v, %s maps %v", names, kueueConfigFile, want)
	}
}
