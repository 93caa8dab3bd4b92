// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package version says which build of the driver a binary is: its version,
// the commit it was built from and when that commit was made. Every binary
// prints it for --version (and `version`), the plugin logs it at start and
// exports it as gpu_dra_build_info, so a bug report names its build.
//
// The values come from the linker (make build, hack/cluster/images.sh and
// make release pass hack/version.sh's -ldflags):
//
//	-X github.com/gpu-dra-driver/gpu-dra-driver/pkg/version.version=v0.2.0
//	-X github.com/gpu-dra-driver/gpu-dra-driver/pkg/version.commit=<sha>
//	-X github.com/gpu-dra-driver/gpu-dra-driver/pkg/version.date=<RFC 3339>
//
// A binary built without them (`go build`, `go install ...@v0.2.0`) falls
// back to what the Go toolchain embeds (runtime/debug.ReadBuildInfo): the
// module's version for `go install pkg@version`, and the VCS revision, time
// and dirty flag for a build inside a git checkout.
//
// The package imports nothing but the standard library, so that every
// binary, kubectl-gpu included, can link it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-X); see the package comment.
var (
	version string
	commit  string
	date    string
)

// Unknown stands for a value neither the linker nor the build info gave.
const Unknown = "unknown"

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get is this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, commit, date, bi)
}

// resolve fills what the linker left empty from bi (nil: no build info).
func resolve(version, commit, date string, bi *debug.BuildInfo) Info {
	info := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if info.Version == "" {
			// "(devel)" is what a build of the main module from a
			// checkout says; `go install pkg@v0.2.0` says v0.2.0.
			if v := bi.Main.Version; v != "" && v != "(devel)" {
				info.Version = v
			}
		}
		if info.Commit == "" {
			info.Commit = settings["vcs.revision"]
			if info.Commit != "" && settings["vcs.modified"] == "true" {
				info.Commit += "-dirty"
			}
		}
		if info.Date == "" {
			info.Date = settings["vcs.time"]
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	if info.Date == "" {
		info.Date = Unknown
	}
	return info
}

// String is what --version prints after the binary's name, e.g.
// "v0.2.0 (commit 1244c00d..., date 2026-11-25T10:00:00Z, go1.26.8 linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, date %s, %s %s)", i.Version, i.Commit, i.Date, i.GoVersion, i.Platform)
}

// Line is "PROG VERSION (...)", what --version and `version` print.
func Line(prog string) string { return strings.TrimSpace(prog + " " + Get().String()) }

// ImageTag is the tag a release's image carries for version v (v0.2.0 ->
// 0.2.0): the chart's appVersion, which its default image tag follows.
func ImageTag(v string) string { return strings.TrimPrefix(v, "v") }
