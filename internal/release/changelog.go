// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package release is what `make release` (hack/release.sh through
// cmd/releasetool) and the tests of a release share: CHANGELOG.md read as
// releases, the kubectl-gpu archives, SHA256SUMS and the krew plugin
// manifest that names them, and their checks.
package release

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Release is one "## [X.Y.Z] - DATE" entry of CHANGELOG.md.
type Release struct {
	Version string // without the leading v, as the chart's appVersion
	Date    string
	// Commit is the commit the release was cut from, from the entry's
	// "Cut from commit `SHA`." line; empty until the release is cut (a
	// commit cannot name itself: the line is added by the next one).
	Commit string
	Notes  string // the entry's text below its heading
}

// Changelog is CHANGELOG.md (Keep a Changelog 1.1).
type Changelog struct {
	// Unreleased is the text of the "## [Unreleased]" section: what the
	// checkout has that its newest release has not.
	Unreleased string
	Releases   []Release // newest first
}

var (
	heading   = regexp.MustCompile(`^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?\s*$`)
	cutFrom   = regexp.MustCompile("(?m)^Cut from commit `([0-9a-f]{7,40})`")
	linkRefs  = regexp.MustCompile(`^\[[^\]]+\]: `)
	semverish = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
)

// ParseChangelog reads CHANGELOG.md. Release headings must be semantic
// versions without a v, newest first, each once.
func ParseChangelog(data []byte) (*Changelog, error) {
	c := &Changelog{}
	var cur *strings.Builder
	var rel *Release
	flush := func() {
		if rel != nil {
			rel.Notes = strings.TrimSpace(cur.String())
			if m := cutFrom.FindStringSubmatch(rel.Notes); m != nil {
				rel.Commit = m[1]
			}
			c.Releases = append(c.Releases, *rel)
			rel = nil
		} else if cur != nil {
			c.Unreleased = strings.TrimSpace(cur.String())
		}
	}
	sawUnreleased := false
	s := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; s.Scan(); line++ {
		text := s.Text()
		if m := heading.FindStringSubmatch(text); m != nil {
			flush()
			cur = &strings.Builder{}
			if strings.EqualFold(m[1], "Unreleased") {
				if sawUnreleased || len(c.Releases) > 0 {
					return nil, fmt.Errorf("CHANGELOG.md:%d: [Unreleased] must come once, above every release", line)
				}
				sawUnreleased = true
				continue
			}
			if !semverish.MatchString(m[1]) || m[2] == "" {
				return nil, fmt.Errorf("CHANGELOG.md:%d: %q: a release heading is \"## [X.Y.Z] - YYYY-MM-DD\" (no v before the version)", line, text)
			}
			rel = &Release{Version: m[1], Date: m[2]}
			continue
		}
		if cur != nil && !linkRefs.MatchString(text) {
			cur.WriteString(text)
			cur.WriteByte('\n')
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	flush()
	for i := 1; i < len(c.Releases); i++ {
		if compareVersions(c.Releases[i-1].Version, c.Releases[i].Version) <= 0 {
			return nil, fmt.Errorf("CHANGELOG.md: release %s is listed above %s: newest first, each version once", c.Releases[i-1].Version, c.Releases[i].Version)
		}
	}
	return c, nil
}

// Newest is the newest release, or nil when there is none.
func (c *Changelog) Newest() *Release {
	if len(c.Releases) == 0 {
		return nil
	}
	return &c.Releases[0]
}

// Find is the release of version (with or without a leading v).
func (c *Changelog) Find(version string) (*Release, error) {
	v := strings.TrimPrefix(version, "v")
	for i := range c.Releases {
		if c.Releases[i].Version == v {
			return &c.Releases[i], nil
		}
	}
	return nil, fmt.Errorf("CHANGELOG.md has no entry \"## [%s] - YYYY-MM-DD\": add one (its notes and its Upgrading section) before releasing %s", v, version)
}

// Previous is the release the code of this checkout upgrades from: while
// [Unreleased] lists changes, the checkout is past its newest release, so
// that one; when [Unreleased] is empty the checkout is the newest release
// itself, so the one before it. Only releases that name the commit they
// were cut from count (so that the upgrade test can build them). nil: none
// yet (v0.2.0, the first release, has no previous one).
func (c *Changelog) Previous() *Release {
	skip := 1
	if c.Unreleased != "" {
		skip = 0
	}
	for i := skip; i < len(c.Releases); i++ {
		if c.Releases[i].Commit != "" {
			return &c.Releases[i]
		}
	}
	return nil
}

// compareVersions orders X.Y.Z[-PRE] as semantic versioning does, but for
// the order among pre-releases of one X.Y.Z, which is by string (the
// changelog's releases need no more; x/mod's semver is not a direct
// dependency).
func compareVersions(a, b string) int {
	an, apre, _ := strings.Cut(a, "-")
	bn, bpre, _ := strings.Cut(b, "-")
	as, bs := strings.Split(an, "."), strings.Split(bn, ".")
	for i := range 3 {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x - y
		}
	}
	switch {
	case apre == bpre:
		return 0
	case apre == "":
		return 1
	case bpre == "":
		return -1
	}
	return strings.Compare(apre, bpre)
}
