// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/gpu-dra-driver/gpu-dra-driver/"

// nodeSide are the packages the operator's binary must not link: each is
// the package and everything under it.
var nodeSide = []string{
	module + "pkg/driver",
	module + "pkg/prepare", // but pkg/prepare/step, below
	module + "pkg/simulate",
	module + "pkg/backend",
	module + "pkg/sharing",
	module + "pkg/cdi",
	module + "pkg/checkpoint",
	module + "pkg/mig",
	module + "pkg/ledger",
	module + "pkg/health",
	module + "pkg/vfio",
	module + "pkg/devicestatus",
	module + "internal/node",
	module + "internal/fakeapi",
	module + "internal/schedtest",
	module + "internal/migpacking",
	// NVML: the inventory and its bindings (cgo). The device vocabulary
	// the commands read slices with is in pkg/deviceattr.
	module + "pkg/nvdev",
	"github.com/NVIDIA/go-nvml", // the bindings and the NVML mock server
	"github.com/NVIDIA/go-nvlib",
	"k8s.io/client-go/kubernetes/fake", // and any other .../fake, below
	// (not k8s.io/client-go/testing: every typed client links it, through
	// k8s.io/client-go/gentype)
	"k8s.io/dynamic-resource-allocation/kubeletplugin",
	"k8s.io/kubelet",
	"google.golang.org/grpc",
	// Go's plugin package (kustomize's plugin loader, through
	// cli-runtime's genericclioptions): in a cgo binary it makes the
	// linker bind every symbol at start, and go-nvml's are not there.
	"plugin",
	"sigs.k8s.io/kustomize",
}

// allowed are packages under nodeSide that the commands share with the
// node: pkg/prepare/step names the prepare steps that diagnose finds in
// events, and imports only the standard library.
var allowed = []string{module + "pkg/prepare/step"}

// needed must be there: without them the list is not the binary's.
var needed = []string{
	module + "internal/opcmd", module + "pkg/diagnose", module + "pkg/fleetview", module + "pkg/deviceattr",
	"k8s.io/cli-runtime/pkg/printers", "k8s.io/client-go/tools/clientcmd",
}

// deps lists what `go build` links for the package in dir (with the build
// tags of `make build` or none), by `go list -deps`.
func deps(t *testing.T, dir string, tags ...string) []string {
	return strings.Fields(goList(t, dir, "{{.ImportPath}}", tags...))
}

// cgoDeps are the packages outside the standard library among those `go
// build` links for the package in dir that have cgo files (with cgo on, as
// `go list` sees it here). The standard library's (runtime/cgo, net,
// os/user) have pure Go fallbacks; other packages' may have none, as
// go-nvml's bindings do not.
func cgoDeps(t *testing.T, dir string) []string {
	return strings.Fields(goList(t, dir, "{{if and .CgoFiles (not .Standard)}}{{.ImportPath}}{{end}}", "grpcnotrace"))
}

func goList(t *testing.T, dir, format string, tags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	args := []string{"list", "-deps", "-f", format}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command(goTool, append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps in %s: %v", dir, err)
	}
	return string(out)
}

// forbidden are the node-side packages among pkgs.
func forbidden(pkgs []string) []string {
	var bad []string
	for _, p := range pkgs {
		if slices.Contains(allowed, p) {
			continue
		}
		for _, n := range nodeSide {
			if p == n || strings.HasPrefix(p, n+"/") || strings.HasSuffix(p, "/fake") || strings.Contains(p, "/fake/") {
				bad = append(bad, p)
				break
			}
		}
	}
	return bad
}

// TestNoNodeSideDependencies: kubectl-gpu links no driver, prepare code,
// simulator, NVML mock, fake clientset or kubelet plugin gRPC.
func TestNoNodeSideDependencies(t *testing.T) {
	for _, tags := range [][]string{nil, {"grpcnotrace"}} {
		pkgs := deps(t, ".", tags...)
		for _, n := range needed {
			if !slices.Contains(pkgs, n) {
				t.Fatalf("tags %v: %s is not in the %d packages listed; is the list the binary's?", tags, n, len(pkgs))
			}
		}
		if bad := forbidden(pkgs); len(bad) > 0 {
			t.Errorf("tags %v: kubectl-gpu links %d node-side packages, e.g.:\n  %s", tags, len(bad), strings.Join(bad[:min(len(bad), 20)], "\n  "))
		}
		t.Logf("tags %v: %d packages", tags, len(pkgs))
	}
}

// TestNoCgoDependencies: operators run kubectl plugins on laptops (macOS,
// Windows, arm64), where there is no C cross compiler and no NVML; nothing
// kubectl-gpu links may need cgo.
func TestNoCgoDependencies(t *testing.T) {
	if bad := cgoDeps(t, "."); len(bad) > 0 {
		t.Errorf("kubectl-gpu links packages with cgo: %s", strings.Join(bad, ", "))
	}
}

// TestDepsCheckFindsTheDevBinarysNodeSide: the check above finds the node
// side where it is, in gpudra (the demo runs the driver on the simulator).
func TestDepsCheckFindsTheDevBinarysNodeSide(t *testing.T) {
	bad := forbidden(deps(t, "../gpudra", "grpcnotrace"))
	for _, want := range []string{module + "pkg/driver", module + "pkg/prepare", module + "pkg/simulate", module + "internal/node",
		"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server", "k8s.io/client-go/kubernetes/fake"} {
		if !slices.Contains(bad, want) {
			t.Errorf("the check misses %s in gpudra", want)
		}
	}
	if slices.Contains(bad, module+"pkg/prepare/step") {
		t.Error("pkg/prepare/step is allowed, but the check reports it")
	}
	if !slices.Contains(bad, module+"pkg/nvdev") {
		t.Errorf("the check misses %s in gpudra", module+"pkg/nvdev")
	}
	if c := cgoDeps(t, "../gpudra"); !slices.Contains(c, "github.com/NVIDIA/go-nvml/pkg/nvml") {
		t.Errorf("the cgo check misses go-nvml's bindings in gpudra; it finds %v", c)
	}
}
