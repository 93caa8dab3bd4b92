// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"path/filepath"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/release"
)

// TestImageTagFollowsAppVersion: without image.tag the plugin runs the
// image of the chart's appVersion, the release's (make release names its
// image so); image.tag still wins, as hack/cluster/deploy.sh's local builds
// need.
func TestImageTagFollowsAppVersion(t *testing.T) {
	chart, err := release.ReadChart(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plugin(t, render(t)).Image, "localhost/gpu-dra-driver:"+chart.AppVersion; got != want {
		t.Errorf("default image %s, want %s", got, want)
	}
	if got := plugin(t, render(t, "image.tag=abc123-0f0f0f0f")).Image; got != "localhost/gpu-dra-driver:abc123-0f0f0f0f" {
		t.Errorf("image.tag=abc123-0f0f0f0f: image %s", got)
	}
}
