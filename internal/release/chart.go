// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// ChartVersions are Chart.yaml's version and appVersion.
type ChartVersions struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// ReadChart reads a chart's Chart.yaml.
func ReadChart(path string) (ChartVersions, error) {
	var c ChartVersions
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// CheckChartMatches: the chart's appVersion (which its default image tag
// follows) and its version are the newest CHANGELOG.md release's: the
// chart a release packages installs that release's image.
func CheckChartMatches(c ChartVersions, log *Changelog) error {
	newest := log.Newest()
	if newest == nil {
		return fmt.Errorf("CHANGELOG.md has no release entry; the chart's appVersion %q must be one", c.AppVersion)
	}
	if c.AppVersion != newest.Version {
		return fmt.Errorf("chart appVersion %q (Chart.yaml), but CHANGELOG.md's newest release is %s: set appVersion: %q (or add the release's entry to CHANGELOG.md)", c.AppVersion, newest.Version, newest.Version)
	}
	if c.Version != newest.Version {
		return fmt.Errorf("chart version %q (Chart.yaml), but CHANGELOG.md's newest release is %s: the chart is versioned with the driver; set version: %s", c.Version, newest.Version, newest.Version)
	}
	return nil
}
