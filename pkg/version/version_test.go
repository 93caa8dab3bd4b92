// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified, when string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}, {Key: "vcs.time", Value: when}}
	}
	for _, tc := range []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
	}{{
		name:    "linker flags win over the build info",
		version: "v0.2.0", commit: "abc123", date: "2026-11-25T10:00:00Z",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("fff", "true", "2020-01-01T00:00:00Z")},
		want: Info{Version: "v0.2.0", Commit: "abc123", Date: "2026-11-25T10:00:00Z", GoVersion: "go1.26.8"},
	}, {
		name: "go install pkg@v0.2.0: the module's version, no VCS",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/gpu-dra-driver/gpu-dra-driver", Version: "v0.2.0"}},
		want: Info{Version: "v0.2.0", Commit: Unknown, Date: Unknown, GoVersion: "go1.26.8"},
	}, {
		name: "go build in a modified checkout",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("1244c00d", "true", "2026-11-20T08:00:00Z")},
		want: Info{Version: "devel", Commit: "1244c00d-dirty", Date: "2026-11-20T08:00:00Z", GoVersion: "go1.26.8"},
	}, {
		name: "go build in a clean checkout",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("1244c00d", "false", "2026-11-20T08:00:00Z")},
		want: Info{Version: "devel", Commit: "1244c00d", Date: "2026-11-20T08:00:00Z", GoVersion: "go1.26.8"},
	}, {
		name:    "only the version from the linker: the rest from the build info",
		version: "v0.3.0-dev",
		bi:      &debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs("beef", "false", "2026-12-01T00:00:00Z")},
		want:    Info{Version: "v0.3.0-dev", Commit: "beef", Date: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.commit, tc.date, tc.bi)
			tc.want.Platform = got.Platform
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := resolve("", "", "", nil); got.Version != "devel" || got.Commit != Unknown || got.Date != Unknown || got.GoVersion == "" {
		t.Errorf("without build info: %+v", got)
	}
}

func TestLineAndImageTag(t *testing.T) {
	line := Line("kubectl-gpu")
	for _, want := range []string{"kubectl-gpu ", "commit ", "date ", Get().GoVersion, Get().Platform} {
		if !strings.Contains(line, want) {
			t.Errorf("Line %q lacks %q", line, want)
		}
	}
	if got := ImageTag("v0.2.0"); got != "0.2.0" {
		t.Errorf("ImageTag(v0.2.0) = %q, want 0.2.0 (the chart's appVersion)", got)
	}
}
