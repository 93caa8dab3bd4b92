// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// driverRootMount is a plugin mount at or below /driver-root with its
// hostPath.
type driverRootMount struct {
	corev1.VolumeMount
	host string
}

func driverRootMountsOf(t *testing.T, ds *appsv1.DaemonSet) []driverRootMount {
	t.Helper()
	var out []driverRootMount
	for _, m := range plugin(t, ds).VolumeMounts {
		if under(m.MountPath, "/driver-root") {
			out = append(out, driverRootMount{m, hostPath(ds, m.Name)})
		}
	}
	return out
}

// Issue 42, "Hardened mode that is hardened": with driverRoot / (a driver
// installed on the host, the default), the plugin pod mounts no hostPath
// that holds /etc/shadow, the kubelet's pod volumes (ServiceAccount
// tokens) or the container runtime's socket; every driver-root mount is
// read-only, recursively (recursiveReadOnly, which the API allows only with
// propagation None), and at the host's own path under /driver-root, so the
// plugin and nvcdi find the host's layout there. Real GPUs privileged and
// not (the hardened mode), and the simulated devices node mode over /.
func TestChartHostDriverRootMountsOnlyTheDriversPaths(t *testing.T) {
	secrets := []string{"/etc/shadow", "/var/lib/kubelet/pods", "/var/lib/k/pods", "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock", "/root/.kube/config"}
	for _, mode := range [][]string{
		nil,
		{"kubeletPlugin.privileged=false"},
		{"kubeletPlugin.privileged=false", "kubeletDir=/var/lib/k"},
		{"simulate.profile=h100x8", "simulate.nodeMode=devices"},
	} {
		ds := render(t, append(slices.Clone(mode), "driverRoot=/")...)
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.HostPath == nil {
				continue
			}
			for _, s := range secrets {
				if under(s, v.HostPath.Path) {
					t.Errorf("%v: hostPath volume %s (%s) holds %s", mode, v.Name, v.HostPath.Path, s)
				}
			}
		}
		mounts := driverRootMountsOf(t, ds)
		var hosts []string
		for _, m := range mounts {
			hosts = append(hosts, m.host)
			if m.host == "" {
				t.Errorf("%v: %s at %s is not a hostPath", mode, m.Name, m.MountPath)
				continue
			}
			if !m.ReadOnly {
				t.Errorf("%v: %s -> %s is writable", mode, m.host, m.MountPath)
			}
			if p := m.MountPropagation; p != nil && *p != corev1.MountPropagationNone {
				t.Errorf("%v: %s -> %s has propagation %s; recursiveReadOnly needs None", mode, m.host, m.MountPath, *p)
			}
			if r := m.RecursiveReadOnly; r == nil || (*r != corev1.RecursiveReadOnlyIfPossible && *r != corev1.RecursiveReadOnlyEnabled) {
				t.Errorf("%v: %s -> %s is not recursively read-only (recursiveReadOnly %v)", mode, m.host, m.MountPath, r)
			}
			if want := filepath.Join("/driver-root", m.host); m.MountPath != want {
				t.Errorf("%v: %s mounted at %s, want %s (the host's layout under --driver-root)", mode, m.host, m.MountPath, want)
			}
		}
		// What the plugin reads there (values.yaml, driverRootPaths): the
		// ld cache, NVIDIA's libraries and tools, device nodes.
		for _, need := range []string{"/etc/ld.so.cache", "/usr", "/lib", "/lib64", "/bin", "/dev", "/proc/driver"} {
			if !slices.Contains(hosts, need) {
				t.Errorf("%v: driver-root mounts %v lack %s", mode, hosts, need)
			}
		}
		c := plugin(t, ds)
		if v, _ := flag(c, "--driver-root"); v != "/driver-root" {
			t.Errorf("%v: --driver-root = %q", mode, v)
		}
		if v, _ := flag(c, "--host-driver-root"); v != "/" {
			t.Errorf("%v: --host-driver-root = %q, want / (CDI specs name host paths)", mode, v)
		}
	}
	// The simulated files mode mounts no driver root at all.
	if m := driverRootMountsOf(t, render(t, "simulate.profile=h100x8", "driverRoot=/")); len(m) != 0 {
		t.Errorf("simulated files mode mounts %v", m)
	}
	// A driver tree of its own stays one HostToContainer mount (the GPU
	// Operator's driver container mounts it after the plugin may start).
	ds := render(t, "driverRoot=/run/nvidia/driver", "kubeletPlugin.privileged=false")
	if m := driverRootMountsOf(t, ds); len(m) != 1 || m[0].host != "/run/nvidia/driver" || m[0].MountPath != "/driver-root" || !m[0].ReadOnly ||
		m[0].MountPropagation == nil || *m[0].MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("GPU Operator driver root: mounts %+v", m)
	}
}

// A driverRoot that holds the host's secrets is refused (it would be
// mounted whole, not recursively read-only), and so is a driverRootPaths
// entry that reaches /etc (but the ld cache), /var, /run, /root, /home or
// the root itself.
func TestChartRefusesDriverRootsWithSecrets(t *testing.T) {
	for _, set := range [][]string{
		{"driverRoot=/var"}, {"driverRoot=/var/lib"}, {"driverRoot=/run"}, {"driverRoot=/etc"},
		{"driverRoot=/var/lib/k", "kubeletDir=/var/lib/k/kubelet"},
		{"driverRootPaths[0].path=/etc", "driverRootPaths[0].type=Directory"},
		{"driverRootPaths[0].path=/etc/shadow", "driverRootPaths[0].type=File"},
		{"driverRootPaths[0].path=/var/lib/kubelet", "driverRootPaths[0].type=Directory"},
		{"driverRootPaths[0].path=/run", "driverRootPaths[0].type=Directory"},
		{"driverRootPaths[0].path=/", "driverRootPaths[0].type=Directory"},
		{"driverRootPaths[0].path=/usr/../etc", "driverRootPaths[0].type=Directory"},
		{"driverRootPaths[0].path=/usr", "driverRootPaths[0].type=Socket"},
	} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := exec.Command(helmBinary(t), args...).CombinedOutput(); err == nil {
			t.Errorf("%v rendered", set)
		} else if !strings.Contains(string(out), "driverRoot") && !strings.Contains(string(out), "/driverRootPaths/0") {
			t.Errorf("%v refused without naming the value: %s", set, out)
		}
	}
	// Allowed: the GPU Operator's tree, another tree, an extra path.
	render(t, "driverRoot=/run/nvidia/driver")
	render(t, "driverRoot=/home/kubernetes/bin/nvidia")
	render(t, "driverRootPaths[0].path=/usr/local/nvidia", "driverRootPaths[0].type=Directory")
}
