// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package docs checks the repository's documentation against the tree: the
// architecture page names every package, every relative link of README.md
// and docs/*.md reaches an existing file and heading, and the README stays
// short (its details live in docs/).
package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines bounds README.md: what is longer belongs in docs/.
const maxReadmeLines = 260

// repoRoot is the directory holding go.mod, found upwards from the test's
// working directory (the package directory under go test).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// packageDirs lists, relative to root and with forward slashes, every
// directory under the given top-level directories that holds a .go file.
func packageDirs(t *testing.T, root string, tops ...string) []string {
	t.Helper()
	var out []string
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(d.Name(), ".go") {
				return nil
			}
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	page := readFile(t, filepath.Join(root, "docs", "architecture.md"))
	dirs := packageDirs(t, root, "pkg", "internal")
	if len(dirs) == 0 {
		t.Fatal("found no package under pkg/ or internal/")
	}
	for _, dir := range dirs {
		if !strings.Contains(page, "`"+dir+"`") {
			t.Errorf("docs/architecture.md does not name package %s: add a row `%s` with its role to the Layout table", dir, dir)
		}
	}
}

func TestReadmeIsShort(t *testing.T) {
	root := repoRoot(t)
	if n := lineCount(readFile(t, filepath.Join(root, "README.md"))); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move details to a page under docs/ and link it", n, maxReadmeLines)
	}
}

func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// markdownFiles are the files whose links are checked: README.md and
// docs/*.md, relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	files := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

func TestRelativeLinksResolve(t *testing.T) {
	root := repoRoot(t)
	anchorCache := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchorCache[path]; ok {
			return a
		}
		a := anchors(readFile(t, path))
		anchorCache[path] = a
		return a
	}
	checked := 0
	for _, file := range markdownFiles(t, root) {
		src := filepath.Join(root, filepath.FromSlash(file))
		for _, l := range links(readFile(t, src)) {
			if isExternal(l.target) {
				continue
			}
			checked++
			pathPart, fragment, _ := strings.Cut(l.target, "#")
			dest := src
			if pathPart != "" {
				dest = filepath.Join(filepath.Dir(src), filepath.FromSlash(pathPart))
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", file, l.line, l.target, pathPart)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s:%d: link %q: an anchor in a file that is not markdown", file, l.line, l.target)
				continue
			}
			if !anchorsOf(dest)[fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", file, l.line, l.target, filepath.Base(dest), fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link at all: the link parser is broken")
	}
}

// link is one markdown link target and the line it is on.
type link struct {
	target string
	line   int
}

var (
	// inlineLink matches [text](target) and [text](target "title"); the
	// text may be empty once code spans are removed.
	inlineLink = regexp.MustCompile(`\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLink matches a reference definition: [name]: target
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	scheme   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the link targets of a markdown text outside code blocks
// and code spans.
func links(text string) []link {
	var out []link
	forEachProseLine(text, func(n int, line string) {
		if m := refLink.FindStringSubmatch(line); m != nil {
			out = append(out, link{target: m[1], line: n})
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{target: m[1], line: n})
		}
	})
	return out
}

func isExternal(target string) bool {
	return scheme.MatchString(target) || strings.HasPrefix(target, "//")
}

// forEachProseLine calls f with every line (1-based number) outside fenced
// code blocks.
func forEachProseLine(text string, f func(n int, line string)) {
	fence := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		f(n, line)
	}
}

var atxHeading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)

// anchors returns the anchors GitHub gives the headings of a markdown
// text, with -1, -2, ... for repeated ones.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	forEachProseLine(text, func(_ int, line string) {
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	})
	return out
}

var headingLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading: link text kept, lower-cased,
// spaces to hyphens, every other character but letters, digits, - and _
// dropped.
func slug(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start": "quick-start",
		"A node's life: reboot, API outage, upgrade and downgrade": "a-nodes-life-reboot-api-outage-upgrade-and-downgrade",
		"Troubleshooting: `gpudra diagnose`":                       "troubleshooting-gpudra-diagnose",
		"Why does `nvidia.com/gpu` not appear on the node?":        "why-does-nvidiacomgpu-not-appear-on-the-node",
		"Placement order: packing pod by pod":                      "placement-order-packing-pod-by-pod",
		"See [MIG](mig.md) here":                                   "see-mig-here",
		"snake_case and-hyphen":                                    "snake_case-and-hyphen",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	a := anchors("# Top\n## Notes\n```\n## Not a heading\n```\n## Notes\n")
	for _, want := range []string{"top", "notes", "notes-1"} {
		if !a[want] {
			t.Errorf("anchors: missing #%s in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("anchors: a line in a code block counted as a heading")
	}
}

func TestLinksSkipCode(t *testing.T) {
	got := links("see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n[`d`](d.md#x \"title\")\n[e]: e.md\n")
	var targets []string
	for _, l := range got {
		targets = append(targets, l.target)
	}
	if want := []string{"a.md", "d.md#x", "e.md"}; !slices.Equal(targets, want) {
		t.Errorf("links = %q, want %q", targets, want)
	}
}
