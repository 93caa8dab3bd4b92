// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// SpecCheck is the outcome of one check of CheckSpec.
type SpecCheck struct {
	Name   string
	OK     bool
	Detail string
}

// SpecFiles returns the claim specs driverName has in dir (the files
// Writer writes), sorted; a missing dir holds none.
func SpecFiles(dir, driverName string) ([]string, error) {
	prefix := cdiapi.GenerateTransientSpecName("k8s."+driverName, class, "")
	return capfile.List(dir, func(name string) bool {
		return strings.HasPrefix(name, prefix) && strings.HasSuffix(name, ".json")
	})
}

// CheckSpec checks the spec of the CDI devices ids in cdiDir as a
// container runtime would meet it on this host: exactly one spec of their
// kind, every device node and mount source exists, every hook is
// installedHook and knows each subcommand the spec uses (`<subcommand>
// --help`), and the CDI library applies the spec to an OCI spec. It
// returns one SpecCheck per check, in that order; it stops at the first
// check when the spec cannot be read.
func CheckSpec(cdiDir string, ids []string, installedHook string) []SpecCheck {
	var out []SpecCheck
	check := func(ok bool, name, format string, args ...any) {
		out = append(out, SpecCheck{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	kind, _, _ := strings.Cut(strings.Join(ids, ""), "=")
	files, _ := filepath.Glob(filepath.Join(cdiDir, "*.json"))
	var spec *cdispec.Spec
	n := 0
	for _, f := range files {
		// The CDI directory is every CDI user's: a spec is a regular file
		// of bounded size, or not read (pkg/capfile).
		data, err := capfile.Read(f, maxSpecSize)
		if err != nil {
			check(false, "CDI spec", "%v", err)
			return out
		}
		s, err := cdiapi.ParseSpec(data)
		if err != nil {
			check(false, "CDI spec", "%s: %v", f, err)
			return out
		}
		if s.Kind == kind {
			spec, n = s, n+1
		}
	}
	if n != 1 {
		check(false, "CDI spec", "%d spec files of kind %q in %s, want 1", n, kind, cdiDir)
		return out
	}
	all := []cdispec.ContainerEdits{spec.ContainerEdits}
	for _, d := range spec.Devices {
		all = append(all, d.ContainerEdits)
	}
	var nodes, missingNodes, mounts, missingMounts int
	var missing []string
	hooks := map[string][]string{} // hook path -> subcommands
	for _, e := range all {
		for _, n := range e.DeviceNodes {
			nodes++
			if n.Type == "c" && n.Major > 0 {
				continue // created by the runtime (MIG caps)
			}
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			if st, err := os.Stat(host); err != nil || st.Mode()&os.ModeCharDevice == 0 {
				missingNodes++
				missing = append(missing, host)
			}
		}
		for _, m := range e.Mounts {
			mounts++
			if _, err := os.Stat(m.HostPath); err != nil {
				missingMounts++
				missing = append(missing, m.HostPath)
			}
		}
		for _, h := range e.Hooks {
			sub := ""
			if len(h.Args) > 1 {
				sub = h.Args[1]
			}
			if !slices.Contains(hooks[h.Path], sub) {
				hooks[h.Path] = append(hooks[h.Path], sub)
			}
		}
	}
	check(nodes > 0 && missingNodes == 0, "CDI device nodes exist", "%d device nodes, %d missing %v", nodes, missingNodes, missing)
	check(mounts > 0 && missingMounts == 0, "CDI mount sources exist", "%d mounts, %d missing", mounts, missingMounts)

	var paths []string
	for p := range hooks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	check(len(paths) == 1 && paths[0] == installedHook, "CDI hooks name the installed hook", "hook paths %v, installed %s", paths, installedHook)
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o111 == 0 {
			check(false, "hook binary "+filepath.Base(p), "%s is not an executable: %v", p, err)
			continue
		}
		var unknown []string
		subs := hooks[p]
		sort.Strings(subs)
		for _, sub := range subs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, p, sub, "--help").CombinedOutput()
			cancel()
			if err != nil || sub == "" || strings.Contains(string(out), "Unsupported") || !strings.Contains(string(out), sub) {
				unknown = append(unknown, sub)
			}
		}
		check(len(unknown) == 0, "hook knows the spec's subcommands", "%s: %s; unknown: %v", p, strings.Join(subs, " "), unknown)
	}

	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cdiDir), cdiapi.WithAutoRefresh(false))
	if err == nil {
		oc := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
		if _, err = cache.InjectDevices(oc, ids...); err == nil {
			check(true, "CDI spec applies", "%d devices, %d mounts, %d hooks injected into an OCI spec", len(oc.Linux.Devices), len(oc.Mounts), countHooks(oc))
			return out
		}
	}
	check(false, "CDI spec applies", "%v", err)
	return out
}

func countHooks(s *oci.Spec) int {
	if s.Hooks == nil {
		return 0
	}
	return len(s.Hooks.CreateRuntime) + len(s.Hooks.CreateContainer) + len(s.Hooks.StartContainer) + len(s.Hooks.Poststart) + len(s.Hooks.Poststop)
}
