// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A package that calls reflect.Value.MethodByName (html/template does, and
// grpc pulls it in through golang.org/x/net/trace) makes the linker keep every
// exported method of every reachable type. For this plugin that is 22 MB of
// binary and 11 MiB of idle RSS, so the release builds use the grpcnotrace
// tag. This test fails when a new dependency brings such a package back or a
// build script loses the tag.
func TestPluginBinaryKeepsDeadCodeElimination(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goTool, "list", "-tags", "grpcnotrace", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "golang.org/x/net/trace", "html/template":
			t.Errorf("the plugin links %s; it disables the linker's dead-code elimination of methods (see comment above)", pkg)
		}
	}

}

// TestEveryBuildCommandKeepsTheTag checks each `go build` and `go install`
// of this repository's commands in the Makefile, the Dockerfile and the
// scripts: a command that links grpc must be built with grpcnotrace.
func TestEveryBuildCommandKeepsTheTag(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{"Makefile", "Dockerfile"}
	scripts, _ := filepath.Glob(filepath.Join(root, "hack", "*.sh"))
	more, _ := filepath.Glob(filepath.Join(root, "hack", "*", "*.sh"))
	for _, f := range append(scripts, more...) {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	makeTags := regexp.MustCompile(`(?m)^GO_TAGS \?= *(.*)$`).FindSubmatch(makefile)
	linksGRPC := map[string]bool{}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range buildCommands(string(data)) {
			for _, pkg := range strings.Fields(cmd) {
				if !strings.HasPrefix(pkg, "./cmd/") {
					continue
				}
				links, known := linksGRPC[pkg]
				if !known {
					links = dependsOn(t, filepath.Join(root, pkg), "google.golang.org/grpc")
					linksGRPC[pkg] = links
				}
				checked++
				tagged := strings.Contains(cmd, "grpcnotrace") ||
					(strings.Contains(cmd, "$(GO_TAGS)") && makeTags != nil && strings.Contains(string(makeTags[1]), "grpcnotrace"))
				if links && !tagged {
					t.Errorf("%s builds %s without -tags grpcnotrace: %s", file, pkg, cmd)
				}
			}
		}
	}
	if checked < 4 {
		t.Fatalf("found only %d builds of ./cmd/ packages; the parser is broken", checked)
	}
}

var (
	shellSeparators = regexp.MustCompile(`&&|;|\(|\)`)
	goBuild         = regexp.MustCompile(`\b(go|\$\(GO\)) (build|install)\b`)
)

// buildCommands returns the go build/install commands of a Makefile or
// shell script, with continuation lines joined.
func buildCommands(text string) []string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, part := range shellSeparators.Split(line, -1) {
			if goBuild.MatchString(part) {
				out = append(out, strings.TrimSpace(part))
			}
		}
	}
	return out
}

func dependsOn(t *testing.T, dir, pkg string) bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in %s: %v", dir, err)
	}
	return slices.Contains(strings.Fields(string(out)), pkg)
}
