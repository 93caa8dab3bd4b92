// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const driverRootNS = "gpu-driver-root-e2e"

// driverRootMounts returns the plugin DaemonSet's driver-root volumes and
// the plugin container's mounts of them (everything mounted at or under
// /driver-root), and the container's securityContext. It reads the live
// DaemonSet when that mounts the host's root (--host-driver-root=/); the
// e2e cluster's does not (simulated files mode mounts no driver root, and
// the devices mode a dedicated tree), so otherwise it renders this
// checkout's chart as a real-GPU node in the hardened mode
// (kubeletPlugin.privileged=false) with driverRoot / and this cluster's
// kubelet directory.
func driverRootMounts(t *testing.T) ([]corev1.Volume, []corev1.VolumeMount, *corev1.SecurityContext, string) {
	t.Helper()
	ds, err := client.AppsV1().DaemonSets(driverNS).Get(context.Background(), pluginDS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	source := "the live DaemonSet " + driverNS + "/" + pluginDS
	if !slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--host-driver-root=/") {
		// GPU_DRA_E2E_DRIVER_ROOT_CHART: another chart directory, e.g. an
		// earlier commit's, to see the test fail there.
		chart := envOr("GPU_DRA_E2E_DRIVER_ROOT_CHART", filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver"))
		version, err := client.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("helm", "template", helmRelease, chart, "-n", driverNS, "--kube-version", version.GitVersion,
			"--set", "driverRoot=/", "--set", "kubeletPlugin.privileged=false", "--set", "kubeletDir="+kubeletDir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
		}
		ds = nil
		for _, doc := range strings.Split(string(out), "\n---") {
			if strings.Contains(doc, "kind: DaemonSet") {
				ds = &appsv1.DaemonSet{}
				if err := yaml.Unmarshal([]byte(doc), ds); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if ds == nil {
			t.Fatal("helm template rendered no DaemonSet")
		}
		source = "helm template of " + chart + " (driverRoot=/, kubeletPlugin.privileged=false): the live DaemonSet mounts no host root"
	}
	spec := ds.Spec.Template.Spec
	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "plugin" {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("no plugin container")
	}
	var mounts []corev1.VolumeMount
	var vols []corev1.Volume
	for _, m := range c.VolumeMounts {
		if m.MountPath != "/driver-root" && !strings.HasPrefix(m.MountPath, "/driver-root/") {
			continue
		}
		mounts = append(mounts, m)
		for _, v := range spec.Volumes {
			if v.Name == m.Name {
				vols = append(vols, v)
			}
		}
	}
	if len(mounts) == 0 || len(vols) != len(mounts) {
		t.Fatalf("%s: driver-root mounts %v, volumes %v", source, mounts, vols)
	}
	return vols, mounts, c.SecurityContext, source
}

// specialFS are kernel file systems nobody creates a file in (procfs
// answers ENOENT, not EROFS, on a read-only mount too).
var specialFS = map[string]bool{"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true, "mqueue": true,
	"bpf": true, "tracefs": true, "debugfs": true, "securityfs": true, "pstore": true, "nsfs": true, "fusectl": true,
	"configfs": true, "autofs": true, "binfmt_misc": true, "efivarfs": true, "hugetlbfs": true, "rpc_pipefs": true}

// hostFSType is the type of the host file system that holds path: its
// longest mount point prefix in /proc/self/mountinfo.
func hostFSType(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	best, fs := "", ""
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if len(fields) < 6 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		if mp := fields[4]; (path == mp || mp == "/" || strings.HasPrefix(path, mp+"/")) && len(mp) >= len(best) {
			best, fs = mp, fields[sep+1]
		}
	}
	return fs
}

// hostMountPoint is a line of the host's /proc/self/mountinfo.
type hostMountPoint struct{ path, fstype string }

// writableHostMounts lists the host's mount points at or below dir that
// are read-write on the host and of a file system a process could create
// a file in.
func writableHostMounts(t *testing.T, dir string) []hostMountPoint {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []hostMountPoint
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 6 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mp, opts, fstype := fields[4], fields[5], fields[sep+1]
		if mp != dir && !strings.HasPrefix(mp, strings.TrimSuffix(dir, "/")+"/") {
			continue
		}
		if specialFS[fstype] || slices.Contains(strings.Split(opts, ","), "ro") || seen[mp] || strings.Contains(mp, `\`) {
			continue
		}
		if st, err := os.Stat(mp); err != nil || !st.IsDir() {
			continue
		}
		seen[mp] = true
		out = append(out, hostMountPoint{mp, fstype})
	}
	return out
}

// TestHardenedDriverRootConfined (issue 42, "Hardened mode that is
// hardened"): a pod with the plugin's driver-root volumes and mounts, as
// the hardened real-GPU plugin has them with driverRoot / (the host's
// root), and the plugin container's securityContext, can read neither the
// host's /etc/shadow nor a pod's ServiceAccount token through them, and
// can write under none of them: not the mounted directories themselves
// and not the host's read-write mounts below them (a read-only bind mount
// that is not recursive leaves those writable, /dev/shm for one).
func TestHardenedDriverRootConfined(t *testing.T) {
	vols, mounts, sc, source := driverRootMounts(t)
	t.Logf("driver-root mounts from %s:", source)
	for i, m := range mounts {
		t.Logf("  %s -> %s readOnly=%v recursiveReadOnly=%v propagation=%v", vols[i].HostPath.Path, m.MountPath, m.ReadOnly, ptr.Deref(m.RecursiveReadOnly, ""), ptr.Deref(m.MountPropagation, ""))
	}
	// The attack needs something to find on this host.
	if _, err := os.Stat("/etc/shadow"); err != nil {
		t.Fatalf("this host has no /etc/shadow to protect: %v", err)
	}
	// HostToContainer needs the host path to be a shared or slave mount:
	// the chart's dedicated driver trees are (GPU Operator; deploy.sh makes
	// its own one shared), this machine's / may not be. Propagation
	// decides only whether later host mounts reach the pod, not what it can
	// read or write of those there at its start, which is what this tests.
	for i := range mounts {
		if p := mounts[i].MountPropagation; p != nil && *p != corev1.MountPropagationNone && !sharedOrSlave(t, vols[i].HostPath.Path) {
			t.Logf("%s: the host mount is private here; the test pod mounts it without %s propagation", vols[i].HostPath.Path, *p)
			mounts[i].MountPropagation = nil
		}
	}

	kubectl(t, "create", "namespace", driverRootNS)
	// The pod mounts the plugin's host paths, as the plugin's own pod does:
	// privileged under Pod Security, like the driver's namespace.
	kubectl(t, "label", "namespace", driverRootNS, "pod-security.kubernetes.io/enforce=privileged")
	t.Cleanup(func() { _ = exec.Command("kubectl", "delete", "namespace", driverRootNS, "--wait=false").Run() })
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "driver-root", Namespace: driverRootNS},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Volumes:                       vols,
			Containers: []corev1.Container{{
				Name: "sh", Image: "localhost/busybox:latest", ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"}, VolumeMounts: mounts, SecurityContext: sc,
			}},
		},
	}
	if _, err := client.CoreV1().Pods(driverRootNS).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the driver-root pod Running", 90*time.Second, func() (bool, string) {
		got, err := client.CoreV1().Pods(driverRootNS).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if got.Status.Phase == corev1.PodFailed {
			t.Fatalf("the driver-root pod failed: %+v\n%s", got.Status, events(t, "Pod", p.Name))
		}
		return got.Status.Phase == corev1.PodRunning, fmt.Sprintf("%s %+v", got.Status.Phase, got.Status.ContainerStatuses)
	})
	running, err := client.CoreV1().Pods(driverRootNS).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The pod's own ServiceAccount token, which is on the host now.
	tokens, _ := filepath.Glob(filepath.Join(kubeletDir, "pods", string(running.UID), "volumes", "kubernetes.io~projected", "*", "token"))
	if len(tokens) == 0 {
		t.Fatalf("no ServiceAccount token of the test pod under %s/pods/%s on the host", kubeletDir, running.UID)
	}
	// What the plugin needs is there: the refusals below are not a pod
	// that reads nothing.
	if out, ok := shIn(driverRootNS, p.Name, "cat /driver-root/etc/ld.so.cache >/dev/null && ls /driver-root/usr/bin/ls /driver-root/dev/null"); !ok {
		t.Fatalf("the pod cannot read the driver root's ld cache, /usr/bin or /dev: %s", out)
	}
	for _, secret := range []string{"/etc/shadow", tokens[0]} {
		out, ok := shIn(driverRootNS, p.Name, "cat /driver-root"+secret+" >/dev/null")
		if ok {
			t.Errorf("the pod read the host's %s through /driver-root", secret)
		} else {
			t.Logf("cat /driver-root%s: %s", secret, out)
		}
	}

	// Writes: each mounted directory and every read-write host mount below
	// it that was there when the pod started.
	type target struct {
		inPod   string
		root    bool // the mount itself, not a host submount
		special bool // on procfs, sysfs, ...: any refusal will do
	}
	var targets []target
	for i, m := range mounts {
		host := vols[i].HostPath.Path
		if st, err := os.Stat(host); err != nil || !st.IsDir() {
			continue // a file mount (etc/ld.so.cache): cannot hold a new file
		}
		targets = append(targets, target{m.MountPath, true, specialFS[hostFSType(t, host)]})
		for _, sub := range writableHostMounts(t, host) {
			if sub.path == host {
				continue
			}
			rel, _ := filepath.Rel(host, sub.path)
			targets = append(targets, target{filepath.Join(m.MountPath, rel), false, false})
		}
	}
	probe := fmt.Sprintf(".gdra-driver-root-%d", time.Now().UnixNano())
	dirs := make([]string, len(targets))
	for i, tg := range targets {
		dirs[i] = tg.inPod
	}
	out, _ := shIn(driverRootNS, p.Name, writeScript(dirs, probe))
	refused := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if dir, ok := strings.CutPrefix(line, "WROTE "); ok {
			t.Errorf("the pod wrote under %s", dir)
		} else if rest, ok := strings.CutPrefix(line, "REFUSED "); ok {
			dir, why, _ := strings.Cut(rest, ": ")
			refused[dir] = why
		}
	}
	roots := 0
	for _, tg := range targets {
		if tg.root {
			roots++
		}
		why, ok := refused[tg.inPod]
		if ok && tg.root && !tg.special && !strings.Contains(why, "Read-only file system") {
			t.Errorf("writing under %s failed with %q, want a read-only file system", tg.inPod, why)
		}
		if !ok && !strings.Contains(out, "WROTE "+tg.inPod+"\n") && !strings.HasSuffix(out, "WROTE "+tg.inPod) {
			t.Errorf("no result for %s:\n%s", tg.inPod, out)
		}
	}
	t.Logf("writes tried under %d mounted directories and %d read-write host mounts below them:\n%s", roots, len(targets)-roots, out)
}

// writeScript tries to create a file in each directory and prints WROTE
// or REFUSED (with the error) per directory; it removes what it wrote.
func writeScript(dirs []string, probe string) string {
	var b strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&b, "if e=$(touch '%[1]s/%[2]s' 2>&1); then echo 'WROTE %[1]s'; rm -f '%[1]s/%[2]s'; else echo \"REFUSED %[1]s: $e\"; fi\n", d, probe)
	}
	return b.String()
}

// sharedOrSlave reports whether the host mount holding path propagates
// (shared or slave), which HostToContainer needs.
func sharedOrSlave(t *testing.T, path string) bool {
	t.Helper()
	out, err := exec.Command("findmnt", "-n", "-o", "PROPAGATION", "--target", path).Output()
	if err != nil {
		t.Fatalf("findmnt --target %s: %v", path, err)
	}
	prop := strings.TrimSpace(string(out))
	return strings.Contains(prop, "shared") || strings.Contains(prop, "slave")
}
