// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
)

// The plugin sees the driver under /driver-root; containerd on the host
// must get host paths.
func TestNvcdiPathsAreRewrittenForTheHost(t *testing.T) {
	edits := cdispec.ContainerEdits{
		DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia0", HostPath: "/driver-root/dev/nvidia0"}},
		Mounts: []*cdispec.Mount{{
			HostPath:      "/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20",
			ContainerPath: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20",
		}},
	}
	got, err := onHost(hostPaths("/driver-root", "/driver-root", "/run/nvidia/driver"), edits)
	if err != nil {
		t.Fatal(err)
	}
	if got.DeviceNodes[0].HostPath != "/run/nvidia/driver/dev/nvidia0" || got.DeviceNodes[0].Path != "/dev/nvidia0" {
		t.Errorf("device node %+v", got.DeviceNodes[0])
	}
	if got.Mounts[0].HostPath != "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20" || got.Mounts[0].ContainerPath != "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20" {
		t.Errorf("mount %+v", got.Mounts[0])
	}
}

// node is a fake GPU node: a driver root nvcdi walks for real, go-nvml's
// mock answering NVML, and nvidia-cdi-hook installed where a chart would
// mount its host directory.
type node struct {
	root *cditest.DriverRoot
	nvml *cditest.NVML
	hook string
}

func newNode(t *testing.T, gpus int, withDev bool) *node {
	t.Helper()
	root := cditest.NewDriverRoot(t, "550.54.15", gpus, withDev)
	src := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	cditest.WriteHookStandIn(t, src, cditest.HookSubcommands)
	hook, err := InstallHook(src, filepath.Join(t.TempDir(), "host", "gpu-dra-driver", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return &node{root: root, nvml: cditest.NewNVML(root.Version, gpus), hook: hook}
}

func (n *node) edits(t *testing.T) *NvcdiEdits {
	t.Helper()
	e, err := NewNvcdiEdits(n.nvml, NvcdiOptions{DriverRoot: n.root.Dir, HookPath: n.hook, ProcRoot: n.root.Proc})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// applied writes a claim's spec with the Writer and injects its devices
// into an OCI spec with the CDI library, as containerd does.
func applied(t *testing.T, e Edits, devices ...Device) (*oci.Spec, *cdispec.Spec) {
	t.Helper()
	dir := t.TempDir()
	w, err := NewWriter(dir, "gpu.nvidia.com", e)
	if err != nil {
		t.Fatal(err)
	}
	uid := types.UID("6a1b0c8e-0000-4000-8000-000000000001")
	if err := w.Write(uid, devices, nil); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 0, len(devices))
	for _, d := range devices {
		ids = append(ids, w.DeviceID(uid, d.Name))
	}
	data, err := os.ReadFile(w.SpecPath(uid))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cdiapi.ParseSpec(data)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("CDI injection: %v", err)
	}
	return spec, raw
}

// checkOnHost checks that everything a spec names exists on the host:
// device nodes (their host path is a character device, or the node is
// fully specified for the runtime to create), mount sources, and hook
// binaries, which must also know the subcommand they are called with.
func checkOnHost(t *testing.T, raw *cdispec.Spec, injected *oci.Spec) {
	t.Helper()
	all := []cdispec.ContainerEdits{raw.ContainerEdits}
	for _, d := range raw.Devices {
		all = append(all, d.ContainerEdits)
	}
	for _, e := range all {
		for _, n := range e.DeviceNodes {
			if n.Type == "c" && n.Major > 0 {
				continue // the runtime creates it
			}
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			st, err := os.Stat(host)
			if err != nil || st.Mode()&os.ModeCharDevice == 0 {
				t.Errorf("device node %s: host path %s is not a character device (%v)", n.Path, host, err)
			}
		}
		for _, m := range e.Mounts {
			if _, err := os.Stat(m.HostPath); err != nil {
				t.Errorf("mount %s: source missing: %v", m.ContainerPath, err)
			}
		}
	}
	for _, m := range injected.Mounts {
		if _, err := os.Stat(m.Source); err != nil {
			t.Errorf("injected mount %s: source missing: %v", m.Destination, err)
		}
	}
	if injected.Hooks == nil {
		t.Fatal("no hooks injected")
	}
	var hooks []oci.Hook
	hooks = append(hooks, injected.Hooks.CreateRuntime...)
	hooks = append(hooks, injected.Hooks.CreateContainer...)
	hooks = append(hooks, injected.Hooks.StartContainer...)
	for _, h := range hooks {
		st, err := os.Stat(h.Path)
		if err != nil || st.Mode().Perm()&0o111 == 0 {
			t.Errorf("hook %v: %s is not an executable (%v)", h.Args, h.Path, err)
			continue
		}
		if len(h.Args) < 2 {
			t.Errorf("hook %s without subcommand: %v", h.Path, h.Args)
			continue
		}
		out, err := exec.Command(h.Path, h.Args[1], "--help").CombinedOutput()
		if err != nil || strings.Contains(string(out), "Unsupported") || !strings.Contains(string(out), h.Args[1]) {
			t.Errorf("hook %s does not know %q: %v %s", h.Path, h.Args[1], err, out)
		}
	}
}

func hookPaths(e cdispec.ContainerEdits) []string {
	var out []string
	for _, h := range e.Hooks {
		out = append(out, h.Path)
	}
	return out
}

// Defect 6: the spec's hooks run the nvidia-cdi-hook the plugin installed
// on the host, not whatever /usr/bin/nvidia-cdi-hook a host may have, and
// everything the spec names exists.
func TestNvcdiSpecForAWholeGPUAppliesOnTheNode(t *testing.T) {
	n := newNode(t, 2, true)
	e := n.edits(t)
	injected, raw := applied(t, e, Device{Name: "gpu-1", UUID: n.nvml.UUID(1), Minor: 1})
	checkOnHost(t, raw, injected)

	for _, p := range append(hookPaths(raw.ContainerEdits), hookPaths(raw.Devices[0].ContainerEdits)...) {
		if p != n.hook {
			t.Errorf("hook path %s, want the installed %s", p, n.hook)
		}
	}
	var devs []string
	for _, d := range injected.Linux.Devices {
		devs = append(devs, d.Path)
	}
	for _, want := range []string{"/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"} {
		if !slices.Contains(devs, want) {
			t.Errorf("container devices %v lack %s", devs, want)
		}
	}
	if slices.Contains(devs, "/dev/nvidia0") {
		t.Errorf("container got the other GPU: %v", devs)
	}
	var mounts []string
	for _, m := range injected.Mounts {
		mounts = append(mounts, m.Destination)
	}
	if !slices.Contains(mounts, "/"+cditest.LibDir+"/libnvidia-ml.so.550.54.15") || !slices.Contains(mounts, "/usr/bin/nvidia-smi") {
		t.Errorf("driver files not mounted: %v", mounts)
	}
}

// Defect 7: a MIG device gets /dev/nvidia<parent> and the nvidia-caps
// nodes of its GPU instance and compute instance, read from the driver's
// capability files, although none exists under the dev root.
func TestNvcdiSpecForAMigDeviceCarriesItsCapsNodes(t *testing.T) {
	n := newNode(t, 2, true)
	mig := "MIG-5d5b8a3e-7b2a-5f9e-9d55-0f7e52cb6b10"
	other := "MIG-0f9c2b7e-41d5-5a3c-8e61-2b4c5d6e7f80"
	otherGI, otherCI := n.nvml.AddMig(1, other)
	gi, ci := n.nvml.AddMig(1, mig)
	n.root.AddMigCaps(t, 1, gi, ci, 39, 40)
	n.root.AddMigCaps(t, 1, otherGI, otherCI, 48, 49) // not this claim's
	e := n.edits(t)

	injected, raw := applied(t, e, Device{Name: "gpu-1-mig-1g10gb-19-0", UUID: mig, ParentUUID: n.nvml.UUID(1), Minor: 1, MigProfile: "1g.10gb"})
	checkOnHost(t, raw, injected)

	got := map[string]oci.LinuxDevice{}
	for _, d := range injected.Linux.Devices {
		got[d.Path] = d
	}
	for path, minor := range map[string]int64{"/dev/nvidia-caps/nvidia-cap39": 39, "/dev/nvidia-caps/nvidia-cap40": 40} {
		d, ok := got[path]
		if !ok {
			t.Errorf("container devices lack %s: %v", path, got)
			continue
		}
		if d.Type != "c" || d.Major != cditest.CapsMajor || d.Minor != minor || d.FileMode == nil || *d.FileMode != 0o444 {
			t.Errorf("%s = %+v, want c %d:%d mode 0444", path, d, cditest.CapsMajor, minor)
		}
	}
	if _, ok := got["/dev/nvidia1"]; !ok {
		t.Errorf("container devices lack the parent /dev/nvidia1: %v", got)
	}
	for _, other := range []string{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap48", "/dev/nvidia-caps/nvidia-cap49", "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps/nvidia-cap2"} {
		if _, ok := got[other]; ok {
			t.Errorf("container got %s, which is not its device's", other)
		}
	}
	allowed := 0
	for _, r := range injected.Linux.Resources.Devices {
		if r.Allow && r.Major != nil && *r.Major == cditest.CapsMajor {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("%d cgroup rules for nvidia-caps nodes, want 2", allowed)
	}
}

func TestMigCapsErrorsNameTheMissingFile(t *testing.T) {
	n := newNode(t, 1, true)
	mig := "MIG-00000000-0000-0000-0000-000000000001"
	gi, _ := n.nvml.AddMig(0, mig)
	e := n.edits(t)
	_, err := e.ForDevice(Device{Name: "gpu-0-mig-1g10gb-19-0", UUID: mig, ParentUUID: n.nvml.UUID(0)})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("gpu0", "mig", fmt.Sprintf("gi%d", gi), "access")) {
		t.Errorf("error %v, want one naming the missing capability file", err)
	}
}

// Defect 8: a failure is not remembered. The first prepare finds a driver
// root still being installed (no libraries); once the driver is there, the
// next prepare succeeds without a plugin restart. The same holds when NVML
// cannot tell the driver version for a while.
func TestNvcdiRetriesAfterAFailure(t *testing.T) {
	n := newNode(t, 1, true)
	dir := filepath.Join(n.root.Dir, cditest.LibDir)
	hidden := dir + ".installing"
	if err := os.Rename(dir, hidden); err != nil {
		t.Fatal(err)
	}
	e := n.edits(t)
	if _, err := e.ForClaim(nil); err == nil {
		t.Fatal("common edits without driver libraries succeeded")
	}
	if err := os.Rename(hidden, dir); err != nil {
		t.Fatal(err)
	}
	gpu := Device{Name: "gpu-0", UUID: n.nvml.UUID(0)}
	injected, raw := applied(t, e, gpu)
	checkOnHost(t, raw, injected)

	n.nvml.VersionErr = nvml.ERROR_UNKNOWN
	if _, err := e.ForClaim(nil); err == nil {
		t.Error("common edits while NVML fails succeeded")
	}
	if _, err := e.ForDevice(gpu); err == nil {
		t.Error("device edits while NVML fails succeeded")
	}
	n.nvml.VersionErr = nvml.SUCCESS
	injected, raw = applied(t, e, gpu)
	checkOnHost(t, raw, injected)
}

// Defect 8: a driver upgrade under a running plugin: the next claim's spec
// mounts the new version's libraries, not the removed old ones.
func TestNvcdiFollowsADriverUpgrade(t *testing.T) {
	n := newNode(t, 1, true)
	e := n.edits(t)
	gpu := Device{Name: "gpu-0", UUID: n.nvml.UUID(0)}
	_, before := applied(t, e, gpu)
	if !strings.Contains(mountSources(before), "libnvidia-ml.so.550.54.15") {
		t.Fatalf("before the upgrade: %s", mountSources(before))
	}

	n.root.Install(t, "580.95.05")
	n.nvml.DriverVersion = "580.95.05"
	injected, after := applied(t, e, gpu)
	checkOnHost(t, after, injected)
	if s := mountSources(after); strings.Contains(s, "550.54.15") || !strings.Contains(s, "libnvidia-ml.so.580.95.05") {
		t.Errorf("after the upgrade the spec mounts %s", s)
	}
}

func mountSources(s *cdispec.Spec) string {
	var out []string
	for _, m := range s.ContainerEdits.Mounts {
		out = append(out, m.HostPath)
	}
	return strings.Join(out, " ")
}

// Cached edits are handed out as copies: what the Writer appends for one
// claim (an MPS pipe) never lands in another claim's spec.
func TestNvcdiCachedEditsAreNotShared(t *testing.T) {
	n := newNode(t, 1, true)
	e := n.edits(t)
	gpu := Device{Name: "gpu-0", UUID: n.nvml.UUID(0)}
	for _, get := range []func() (cdispec.ContainerEdits, error){
		func() (cdispec.ContainerEdits, error) { return e.ForDevice(gpu) },
		func() (cdispec.ContainerEdits, error) { return e.ForClaim(nil) },
	} {
		first, err := get()
		if err != nil {
			t.Fatal(err)
		}
		second, err := get()
		if err != nil {
			t.Fatal(err)
		}
		a := append(first.Mounts, &cdispec.Mount{HostPath: "/mps/a", ContainerPath: "/mps"})
		_ = append(second.Mounts, &cdispec.Mount{HostPath: "/mps/b", ContainerPath: "/mps"})
		if got := a[len(a)-1].HostPath; got != "/mps/a" {
			t.Errorf("one claim's mount became %s: cached edits share their backing array", got)
		}
		x := append(first.Env, "A=1")
		_ = append(second.Env, "B=1")
		if got := x[len(x)-1]; got != "A=1" {
			t.Errorf("one claim's env became %s", got)
		}
	}
}

// Defect 8: a containerized driver's root has no /dev; its device nodes
// are the host's, under /, and stay at their host path in the spec.
func TestDevRootFallsBackToSlash(t *testing.T) {
	withDev := cditest.NewDriverRoot(t, "550.54.15", 1, true)
	without := cditest.NewDriverRoot(t, "550.54.15", 1, false)
	if got := DevRootFor(withDev.Dir); got != withDev.Dir {
		t.Errorf("DevRootFor(root with /dev) = %s", got)
	}
	if got := DevRootFor(without.Dir); got != "/" {
		t.Errorf("DevRootFor(root without /dev) = %s, want /", got)
	}
	e, err := NewNvcdiEdits(cditest.NewNVML("550.54.15", 1), NvcdiOptions{DriverRoot: without.Dir, HostDriverRoot: "/run/nvidia/driver"})
	if err != nil {
		t.Fatal(err)
	}
	if e.opts.DevRoot != "/" {
		t.Errorf("dev root %s, want /", e.opts.DevRoot)
	}

	// The rewrite for the host: libraries move to the host's driver root,
	// device nodes found under / stay where they are.
	edits := cdispec.ContainerEdits{
		DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia0", HostPath: "/dev/nvidia0"}, {Path: "/dev/nvidiactl"}},
		Mounts:      []*cdispec.Mount{{HostPath: "/driver-root/usr/bin/nvidia-smi", ContainerPath: "/usr/bin/nvidia-smi"}},
	}
	got, err := onHost(hostPaths("/driver-root", "/", "/run/nvidia/driver"), edits)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range got.DeviceNodes {
		if d.HostPath != "" && d.HostPath != d.Path {
			t.Errorf("device node %s: host path %s, want %s", d.Path, d.HostPath, d.Path)
		}
	}
	if got.Mounts[0].HostPath != "/run/nvidia/driver/usr/bin/nvidia-smi" {
		t.Errorf("mount source %s", got.Mounts[0].HostPath)
	}
}
