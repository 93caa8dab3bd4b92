// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"strings"
	"testing"
)

const sample = "# Changelog\n\nintro\n\n## [Unreleased]\n%s\n" +
	"## [0.3.0] - 2027-01-10\n\nCut from commit `0123456789abcdef0123456789abcdef01234567`.\n\n### Upgrading\n- x\n\n" +
	"## [0.2.1] - 2026-12-20\n\nnot cut yet\n\n" +
	"## [0.2.0] - 2026-11-28\n\nCut from commit `abcdef0`.\n\n[0.2.0]: https://example/0.2.0\n"

func parse(t *testing.T, unreleased string) *Changelog {
	t.Helper()
	c, err := ParseChangelog([]byte(strings.Replace(sample, "%s", unreleased, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseChangelog(t *testing.T) {
	c := parse(t, "")
	if len(c.Releases) != 3 || c.Newest().Version != "0.3.0" || c.Releases[0].Date != "2027-01-10" {
		t.Fatalf("releases %+v", c.Releases)
	}
	if c.Releases[0].Commit != "0123456789abcdef0123456789abcdef01234567" || c.Releases[1].Commit != "" || c.Releases[2].Commit != "abcdef0" {
		t.Errorf("commits %q %q %q", c.Releases[0].Commit, c.Releases[1].Commit, c.Releases[2].Commit)
	}
	if !strings.Contains(c.Releases[0].Notes, "### Upgrading") || strings.Contains(c.Releases[0].Notes, "0.2.1") {
		t.Errorf("notes of 0.3.0: %q", c.Releases[0].Notes)
	}
	if strings.Contains(c.Releases[2].Notes, "https://example") {
		t.Errorf("link references belong to no release's notes: %q", c.Releases[2].Notes)
	}
	if r, err := c.Find("v0.2.1"); err != nil || r.Notes != "not cut yet" {
		t.Errorf("Find(v0.2.1): %+v, %v", r, err)
	}
	if _, err := c.Find("v9.9.9"); err == nil || !strings.Contains(err.Error(), "## [9.9.9]") {
		t.Errorf("Find(v9.9.9): %v, want an error naming the heading to add", err)
	}
}

// TestPrevious: with nothing unreleased the checkout is its newest release
// and upgrades from the one before that names its commit (0.2.1 names
// none); with unreleased changes, from the newest.
func TestPrevious(t *testing.T) {
	if p := parse(t, "").Previous(); p == nil || p.Version != "0.2.0" {
		t.Errorf("nothing unreleased: previous %+v, want 0.2.0", p)
	}
	if p := parse(t, "### Fixed\n- y\n").Previous(); p == nil || p.Version != "0.3.0" {
		t.Errorf("unreleased changes: previous %+v, want 0.3.0", p)
	}
	first, err := ParseChangelog([]byte("## [Unreleased]\n\n## [0.2.0] - 2026-11-28\n\nCut from commit `abcdef0`.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := first.Previous(); p != nil {
		t.Errorf("the first release has no previous one, got %+v", p)
	}
}

func TestParseChangelogRejects(t *testing.T) {
	for _, bad := range []string{
		"## [v0.2.0] - 2026-11-28\n", // a v
		"## [0.2.0]\n",               // no date
		"## [0.2.0] - 2026-11-28\n## [0.3.0] - 2026-12-01\n",                                // oldest first
		"## [0.2.0] - 2026-11-28\n## [0.2.0] - 2026-11-28\n",                                // twice
		"## [0.2.0] - 2026-11-28\n## [Unreleased]\n",                                        // unreleased below a release
		"## [0.10.0] - 2026-11-28\n## [0.9.0-rc.1] - 2026-11-28\n## [0.9.0] - 2026-11-28\n", // rc above its release
	} {
		if _, err := ParseChangelog([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := ParseChangelog([]byte("## [0.10.0] - 2026-11-28\n## [0.9.0] - 2026-11-20\n## [0.9.0-rc.1] - 2026-11-10\n")); err != nil {
		t.Errorf("0.10.0 > 0.9.0 > 0.9.0-rc.1: %v", err)
	}
}

func TestCheckChartMatches(t *testing.T) {
	c := parse(t, "")
	if err := CheckChartMatches(ChartVersions{Version: "0.3.0", AppVersion: "0.3.0"}, c); err != nil {
		t.Error(err)
	}
	for _, bad := range []ChartVersions{{Version: "0.3.0", AppVersion: "0.2.0"}, {Version: "0.1.0", AppVersion: "0.3.0"}} {
		if err := CheckChartMatches(bad, c); err == nil || !strings.Contains(err.Error(), "0.3.0") {
			t.Errorf("%+v: %v, want an error naming 0.3.0", bad, err)
		}
	}
}
