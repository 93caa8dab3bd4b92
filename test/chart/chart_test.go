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

// render runs helm template with the given --set values and returns the
// kubelet plugin's DaemonSet.
func render(t *testing.T, set ...string) *appsv1.DaemonSet {
	t.Helper()
	args := []string{"template", "gpu-dra-driver", chartDir, "--namespace", "gpu-dra-driver", "--kube-version", "v1.37.0"}
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
