// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package chart renders the Helm chart with helm itself (`helm template`,
// the helm that hack/cluster/build.sh builds into the cache) and checks
// what a real GPU node needs from the kubelet plugin's DaemonSet.
package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../../deployments/helm/gpu-dra-driver"

// helmBinary finds helm where hack/cluster/lib.sh puts it, else in PATH.
func helmBinary(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("GPU_DRA_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "gpu-dra-driver")
	}
	version := ""
	if lib, err := os.ReadFile("../../hack/cluster/lib.sh"); err == nil {
		if m := regexp.MustCompile(`HELM_VERSION=\$\{HELM_VERSION:-([^}]+)\}`).FindSubmatch(lib); m != nil {
			version = string(m[1])
		}
	}
	if p := filepath.Join(cache, "bin", "helm-"+version, "helm"); version != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if found, _ := filepath.Glob(filepath.Join(cache, "bin", "helm-*", "helm")); len(found) > 0 {
		return found[len(found)-1]
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	t.Skip("helm not built; run hack/cluster/build.sh helm (make test does)")
	return ""
}

// helmTemplate runs helm template on the chart with the given --set values
// and returns the rendered manifests.
func helmTemplate(t *testing.T, set ...string) []byte {
	t.Helper()
	args := []string{"template", "gpu-dra-driver", chartDir, "--namespace", "gpu-dra-driver", "--kube-version", "v1.37.2"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helmBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// render runs helm template with the given --set values and returns the
// kubelet plugin's DaemonSet.
func render(t *testing.T, set ...string) *appsv1.DaemonSet {
	t.Helper()
	out := helmTemplate(t, set...)
	for _, doc := range strings.Split(string(out), "\n---") {
		if !strings.Contains(doc, "kind: DaemonSet") {
			continue
		}
		ds := &appsv1.DaemonSet{}
		if err := yaml.UnmarshalStrict([]byte(doc), ds); err != nil {
			t.Fatalf("DaemonSet: %v\n%s", err, doc)
		}
		return ds
	}
	t.Fatalf("no DaemonSet rendered:\n%s", out)
	return nil
}

func plugin(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	for i, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == "plugin" {
			return &ds.Spec.Template.Spec.Containers[i]
		}
	}
	t.Fatal("no plugin container")
	return nil
}

func mount(c *corev1.Container, name string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if m.Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func hostPath(ds *appsv1.DaemonSet, name string) string {
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}

func flag(c *corev1.Container, name string) (string, bool) {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// Defect 6: on real GPUs the chart mounts a host directory at the same
// path and tells the plugin to install nvidia-cdi-hook there; a hook path
// of the admin's choice replaces both.
func TestChartInstallsTheHookOnTheHost(t *testing.T) {
	ds := render(t)
	c := plugin(t, ds)
	dir, ok := flag(c, "--cdi-hook-install-dir")
	if !ok || dir == "" {
		t.Fatalf("no --cdi-hook-install-dir in %v", c.Args)
	}
	m := mount(c, "cdi-hook")
	if m == nil || m.MountPath != dir || hostPath(ds, "cdi-hook") != dir || m.ReadOnly {
		t.Errorf("hook dir %s: mount %+v, host path %q; want the same path on both sides, writable", dir, m, hostPath(ds, "cdi-hook"))
	}

	ds = render(t, "cdiHook.path=/usr/local/nvidia/toolkit/nvidia-cdi-hook")
	c = plugin(t, ds)
	if p, _ := flag(c, "--nvidia-cdi-hook-path"); p != "/usr/local/nvidia/toolkit/nvidia-cdi-hook" {
		t.Errorf("--nvidia-cdi-hook-path = %q", p)
	}
	if _, ok := flag(c, "--cdi-hook-install-dir"); ok || mount(c, "cdi-hook") != nil {
		t.Errorf("an explicit hook path still installs one: %v", c.Args)
	}

	ds = render(t, "simulate.profile=h100x8")
	c = plugin(t, ds)
	if _, ok := flag(c, "--cdi-hook-install-dir"); ok || mount(c, "cdi-hook") != nil || hostPath(ds, "cdi-hook") != "" {
		t.Errorf("simulated GPUs need no hook: %v", c.Args)
	}
}

// gpuNodeTerms returns, per required node selector term, its label keys
// that must be "true".
func gpuNodeTerms(ds *appsv1.DaemonSet) [][]string {
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out [][]string
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		var keys []string
		for _, e := range term.MatchExpressions {
			if e.Operator == corev1.NodeSelectorOpIn && len(e.Values) == 1 && e.Values[0] == "true" {
				keys = append(keys, e.Key)
			}
		}
		out = append(out, keys)
	}
	return out
}

func env(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// Defect 9: on real GPUs the plugin runs only on GPU nodes (NFD's NVIDIA
// PCI label or the GPU Operator's, either one), overridable; simulated GPUs
// run anywhere.
func TestChartRunsOnGPUNodesOnly(t *testing.T) {
	got := gpuNodeTerms(render(t))
	want := [][]string{{"feature.node.kubernetes.io/pci-10de.present"}, {"nvidia.com/gpu.present"}}
	if len(got) != len(want) || strings.Join(got[0], ",") != want[0][0] || strings.Join(got[1], ",") != want[1][0] {
		t.Errorf("node selector terms %v, want %v (ORed)", got, want)
	}

	if ds := render(t, "simulate.profile=h100x8"); ds.Spec.Template.Spec.Affinity != nil {
		t.Errorf("simulated GPUs got an affinity: %+v", ds.Spec.Template.Spec.Affinity)
	}
	if ds := render(t, "kubeletPlugin.gpuNodeLabels=null"); ds.Spec.Template.Spec.Affinity != nil {
		t.Errorf("gpuNodeLabels=null kept an affinity: %+v", ds.Spec.Template.Spec.Affinity)
	}
	if got := gpuNodeTerms(render(t, "kubeletPlugin.gpuNodeLabels={example.com/gpu}")); len(got) != 1 || got[0][0] != "example.com/gpu" {
		t.Errorf("own GPU label: terms %v", got)
	}
	custom := gpuNodeTerms(render(t,
		"kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
		"kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=In",
		"kubeletPlugin.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]=true"))
	if len(custom) != 1 || len(custom[0]) != 1 || custom[0][0] != "pool" {
		t.Errorf("a full affinity did not replace the default: %v", custom)
	}
}

// Defect 9: the driver root is mounted read-only at /driver-root and the
// plugin container asks the NVIDIA runtime for no GPUs of its own. The
// default driverRoot / is mounted path by path (driverroot_test.go).
func TestChartDriverRootAndRuntimeSettings(t *testing.T) {
	ds := render(t)
	c := plugin(t, ds)
	m := mount(c, "driver-root-usr")
	if m == nil || m.MountPath != "/driver-root/usr" || !m.ReadOnly || hostPath(ds, "driver-root-usr") != "/usr" {
		t.Errorf("driver-root-usr mount %+v, want the host's /usr read-only at /driver-root/usr", m)
	}
	if m := mount(c, "driver-root"); m != nil {
		t.Errorf("the host's root is mounted whole: %+v", m)
	}
	if v, ok := env(c, "NVIDIA_VISIBLE_DEVICES"); !ok || v != "void" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q (set %v), want void", v, ok)
	}
	if v, _ := flag(c, "--driver-root"); v != "/driver-root" {
		t.Errorf("--driver-root = %q", v)
	}
	if v, _ := flag(c, "--host-driver-root"); v != "/" {
		t.Errorf("--host-driver-root = %q; want /", v)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("real GPUs need a privileged plugin container")
	}
}

// Defect 9: the documented GPU Operator setting. The driver container's
// root at /run/nvidia/driver reaches the plugin (HostToContainer), the
// plugin is told the host path so CDI specs name host paths, and values
// comments and the README say how.
func TestChartGPUOperatorDriverRoot(t *testing.T) {
	ds := render(t, "driverRoot=/run/nvidia/driver")
	c := plugin(t, ds)
	if got := hostPath(ds, "driver-root"); got != "/run/nvidia/driver" {
		t.Errorf("driver-root volume %q", got)
	}
	if v, _ := flag(c, "--host-driver-root"); v != "/run/nvidia/driver" {
		t.Errorf("--host-driver-root = %q", v)
	}
	if v, _ := flag(c, "--driver-root"); v != "/driver-root" {
		t.Errorf("--driver-root = %q", v)
	}
	if m := mount(c, "driver-root"); m == nil || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("driver-root mount %+v", m)
	}
	for _, file := range []string{chartDir + "/values.yaml", "../../README.md"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "driverRoot: /run/nvidia/driver") && !strings.Contains(string(data), "driverRoot=/run/nvidia/driver") {
			t.Errorf("%s does not document the GPU Operator's driverRoot", file)
		}
	}
}

// The schema rejects what the templates cannot use.
func TestChartSchemaRejectsBadValues(t *testing.T) {
	for _, set := range []string{"driverRoot=run/nvidia/driver", "cdiHook.installDir=bin", "kubeletPlugin.gpuNodeLabels[0]=", "kubeletPlugin.bogus=1", "metrics.podMonitor.bogus=1", "metrics.podMonitor.interval=soon"} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2", "--set", set}
		if out, err := exec.Command(helmBinary(t), args...).CombinedOutput(); err == nil {
			t.Errorf("--set %s rendered:\n%.300s", set, out)
		}
	}
}
