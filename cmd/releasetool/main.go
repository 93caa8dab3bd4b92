// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command releasetool is the Go half of hack/release.sh (make release):
// what a shell script would get wrong or make irreproducible, on top of
// internal/release, which the tests of a release share.
//
//	releasetool notes CHANGELOG VERSION          the release's notes (markdown)
//	releasetool previous CHANGELOG               "VERSION COMMIT" of the release the checkout upgrades from, or nothing
//	releasetool check-chart CHART_YAML CHANGELOG  appVersion and version are the newest release's
//	releasetool archives DIR VERSION BIN_DIR LICENSE MTIME
//	                                              kubectl-gpu's archives from BIN_DIR/kubectl-gpu-OS-ARCH[.exe]
//	releasetool krew DIR VERSION BASE_URL         DIR/plugin.yaml for DIR's archives ("" BASE_URL: the release page)
//	releasetool sums DIR                          DIR/SHA256SUMS of every file under DIR
//	releasetool verify DIR                        plugin.yaml, SHA256SUMS and the archives agree
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "releasetool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: releasetool notes|previous|check-chart|archives|krew|sums|verify ARGS... (see its doc comment)")
	}
	need := func(n int, usage string) error {
		if len(args)-1 != n {
			return fmt.Errorf("usage: releasetool %s %s", args[0], usage)
		}
		return nil
	}
	switch args[0] {
	case "notes":
		if err := need(2, "CHANGELOG VERSION"); err != nil {
			return err
		}
		log, err := readChangelog(args[1])
		if err != nil {
			return err
		}
		r, err := log.Find(args[2])
		if err != nil {
			return err
		}
		fmt.Printf("# gpu-dra-driver v%s (%s)\n\n%s\n", r.Version, r.Date, r.Notes)
	case "previous":
		if err := need(1, "CHANGELOG"); err != nil {
			return err
		}
		log, err := readChangelog(args[1])
		if err != nil {
			return err
		}
		if p := log.Previous(); p != nil {
			fmt.Printf("v%s %s\n", p.Version, p.Commit)
		}
	case "check-chart":
		if err := need(2, "CHART_YAML CHANGELOG"); err != nil {
			return err
		}
		c, err := release.ReadChart(args[1])
		if err != nil {
			return err
		}
		log, err := readChangelog(args[2])
		if err != nil {
			return err
		}
		return release.CheckChartMatches(c, log)
	case "archives":
		if err := need(5, "DIR VERSION BIN_DIR LICENSE MTIME_UNIX"); err != nil {
			return err
		}
		secs, err := strconv.ParseInt(args[5], 10, 64)
		if err != nil {
			return fmt.Errorf("MTIME %q: want Unix seconds (git log -1 --format=%%ct): %w", args[5], err)
		}
		for _, p := range release.Platforms {
			bin := filepath.Join(args[3], "kubectl-gpu-"+p.OS+"-"+p.Arch)
			if p.OS == "windows" {
				bin += ".exe"
			}
			files := []release.ArchiveFile{{Name: p.Bin(), Src: bin, Mode: 0o755}, {Name: "LICENSE", Src: args[4], Mode: 0o644}}
			if err := release.WriteArchive(filepath.Join(args[1], p.ArchiveName(args[2])), files, time.Unix(secs, 0)); err != nil {
				return err
			}
		}
	case "krew":
		if err := need(3, "DIR VERSION BASE_URL"); err != nil {
			return err
		}
		base := args[3]
		if base == "" {
			base = release.DefaultBaseURL(args[2])
		}
		m, err := release.NewKrewManifest(args[1], args[2], base)
		if err != nil {
			return err
		}
		return release.WriteKrewManifest(filepath.Join(args[1], "plugin.yaml"), m)
	case "sums":
		if err := need(1, "DIR"); err != nil {
			return err
		}
		var names []string
		err := filepath.WalkDir(args[1], func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(args[1], path)
			if err == nil && rel != "SHA256SUMS" {
				names = append(names, filepath.ToSlash(rel))
			}
			return err
		})
		if err != nil {
			return err
		}
		return release.WriteSHA256Sums(args[1], names)
	case "verify":
		if err := need(1, "DIR"); err != nil {
			return err
		}
		return release.VerifyDist(args[1])
	default:
		return fmt.Errorf("unknown command %q: want notes, previous, check-chart, archives, krew, sums or verify", args[0])
	}
	return nil
}

func readChangelog(path string) (*release.Changelog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return release.ParseChangelog(data)
}
