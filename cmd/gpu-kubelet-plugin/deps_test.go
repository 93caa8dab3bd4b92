package main

import (
	"os"
	"os/exec"
	"path/filepath"
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

	root := filepath.Join("..", "..")
	for _, file := range []string{"Makefile", "Dockerfile", filepath.Join("hack", "cluster", "images.sh")} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "grpcnotrace") {
			t.Errorf("%s builds the plugin without -tags grpcnotrace", file)
		}
	}
}
