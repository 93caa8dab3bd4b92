// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
)

// TestInPlaceDriverUpgrade is an NVIDIA driver upgraded in place, in one
// boot, under running pods (the GPU Operator's driver container: unload,
// new version, load; docs/node-lifecycle.md, "Driver upgrade in place"),
// on the devices node mode, where CDI specs come from nvcdi over a real
// driver root. Pods run on a whole GPU, two MIG devices, a time-sliced
// GPU, an MPS share and a memory fraction; the plugin is stopped, the
// node's driver root is replaced by one of another version, the boot ID
// stays, and the plugin starts again. Every kept claim's spec then records
// the new version and mounts its libraries, all on disk; each pod's
// containers, killed, are started again by the kubelet on the new
// libraries; nothing is left once the pods end.
//
// What is simulated: Debian packages only R535's 535.261.03, so the "new"
// driver (upgradedDriver) is a copy of the node's driver root with its
// versioned files renamed: libcuda.so.535.261.03 becomes
// libcuda.so.535.288.01, bytes unchanged (libcuda still answers CUDA 12.2,
// the 535 branch's). The version is what the plugin and nvcdi go by: the
// simulated NVML reports the version in the driver root's
// libnvidia-ml.so.<version> (pkg/backend DriverVersionIn) and nvcdi looks
// up every library by it. The kernel side is not simulated: no module is
// reloaded, so the simulated MIG devices stay (a real reload destroys
// them, and the restore makes them again, as TestOwnershipProperty's
// driver reloads check), and the running containers' device files and old
// libraries stay usable, where on a GPU their CUDA calls would fail.
func TestInPlaceDriverUpgrade(t *testing.T) {
	requireCleanNode(t)
	mountAt := filepath.Join(clusterDir(), "driver-root") // deploy.sh's driverRoot
	newRoot := filepath.Join(clusterDir(), "driver-root-"+upgradedDriver)
	unstackDriverRoot(t, mountAt) // what an aborted run left
	// Runs last: the files node mode mounts no driver root.
	t.Cleanup(func() {
		unstackDriverRoot(t, mountAt)
		_ = os.RemoveAll(newRoot)
	})
	t.Cleanup(func() { deployProfile(t, "h100x8") })
	root := deployDevicesMode(t)
	assembleUpgradedRoot(t, root, newRoot)

	node, err := os.Hostname() // hack/cluster's $NODE, whose plugin's state is stateDir()
	if err != nil {
		t.Fatal(err)
	}
	testNamespace(t, userspaceNS)
	// TestNodeUserspace's pods, restarted by the kubelet when their
	// process is killed, and on this node.
	applyYAML(t, strings.ReplaceAll(userspaceSpecs(userspaceNS), "  restartPolicy: Never\n",
		"  restartPolicy: Always\n  nodeSelector: {kubernetes.io/hostname: "+node+"}\n"))
	pods := map[string][]string{"whole": {"probe"}, "mig": {"a", "b"}, "timesliced": {"probe"}, "mps": {"probe"}, "fraction": {"probe"}}
	names := []string{"whole", "mig", "timesliced", "mps", "fraction"}
	waitRunningIn(t, userspaceNS, names...)
	claims := map[string]types.UID{}
	for _, name := range names {
		c, err := client.ResourceV1().ResourceClaims(userspaceNS).Get(t.Context(), claimOf(t, userspaceNS, name, "gpu"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims[name] = c.UID
		for _, c := range pods[name] {
			for _, b := range checkLibsOf(probeOf(t, name, c), root, r535Driver) {
				t.Errorf("%s/%s before the upgrade: %s", name, c, b)
			}
		}
		checkSpecDriver(t, name, claims[name], r535Driver, r535Driver)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The upgrade: the plugin is stopped (it holds the driver open through
	// NVML), the new driver's root replaces the old one at the path the
	// chart mounts (the GPU Operator mounts its driver container's root at
	// /run/nvidia/driver the same way) and the plugin starts again.
	boot := bootID(t)
	old := pluginPods(t)
	pluginDown(t)
	t.Cleanup(pluginUp) // a no-op once it is up again
	start := time.Now()
	if out, err := exec.Command("mount", "--bind", newRoot, mountAt).CombinedOutput(); err != nil {
		t.Fatalf("mount the upgraded driver root over %s: %v\n%s", mountAt, err, out)
	}
	// Shared, as deploy.sh makes the first: the chart mounts the driver
	// root with HostToContainer propagation.
	if out, err := exec.Command("mount", "--make-shared", mountAt).CombinedOutput(); err != nil {
		t.Fatalf("mount --make-shared %s: %v\n%s", mountAt, err, out)
	}
	if _, err := os.Stat(filepath.Join(mountAt, libDir, "libcuda.so."+r535Driver)); !os.IsNotExist(err) {
		t.Fatalf("libcuda.so.%s is still under %s after the upgrade (%v)", r535Driver, mountAt, err)
	}
	pluginUp()
	waitNewPlugin(t, old)
	t.Logf("plugin down, driver root replaced, plugin ready again in %.1fs", time.Since(start).Seconds())
	if b := bootID(t); b != boot {
		t.Fatalf("the boot ID changed from %s to %s: this is a reboot, not an in-place upgrade", boot, b)
	}

	// Every kept claim's spec was rewritten before the kubelet was
	// served, and start said so, once per claim.
	for _, name := range names {
		checkSpecDriver(t, name, claims[name], upgradedDriver, r535Driver)
	}
	plugin := ""
	for _, p := range pluginPodList(t) {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			plugin = p.Name
		}
	}
	const rewrote = "Rewrote the CDI spec of a prepared claim after an in-place driver change" // pkg/prepare recover.go
	if n := strings.Count(pluginLogs(t, plugin, false), rewrote); n != len(names) {
		t.Errorf("the plugin logged %d CDI spec rewrites after the driver change, want %d (one per kept claim)", n, len(names))
	}
	waitFor(t, "the Warning PluginStateRecovery on the Node naming the rewrites", 60*time.Second, func() (bool, string) {
		e := nodeEvents(t, "PluginStateRecovery")
		return strings.Contains(e, rewrote) && strings.Contains(e, upgradedDriver), e
	})
	// The running containers kept theirs: nothing was restarted.
	for _, name := range names {
		for _, s := range podIn(t, userspaceNS, name).Status.ContainerStatuses {
			if s.RestartCount != 0 || s.State.Running == nil {
				t.Errorf("%s/%s across the upgrade: restarts %d, state %+v", name, s.Name, s.RestartCount, s.State)
			}
		}
	}

	// A container started again gets the rewritten spec: the new
	// version's libraries, from the new driver root, byte for byte.
	for _, name := range names {
		p := podIn(t, userspaceNS, name)
		for _, pid := range probePIDs(t, p) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s's cudaprobe %d: %v", name, pid, err)
			}
		}
	}
	for _, name := range names {
		waitFor(t, name+"'s containers started again", 120*time.Second, func() (bool, string) {
			p := podIn(t, userspaceNS, name)
			ok := len(p.Status.ContainerStatuses) == len(pods[name])
			var states []string
			for _, s := range p.Status.ContainerStatuses {
				ok = ok && s.RestartCount >= 1 && s.State.Running != nil
				states = append(states, fmt.Sprintf("%s: restarts %d, %s", s.Name, s.RestartCount, containerState(s.State)))
			}
			return ok, strings.Join(states, "; ")
		})
		for _, c := range pods[name] {
			p := probeOf(t, name, c)
			t.Logf("%s/%s after the upgrade:\n%s", name, c, strings.TrimSpace(p.raw))
			for _, b := range checkLibsOf(p, newRoot, upgradedDriver) {
				t.Errorf("%s/%s after the upgrade: %s", name, c, b)
			}
			if p.version != "0 12020" {
				t.Errorf("%s/%s: cuDriverGetVersion %q, want CUDA_SUCCESS 12020", name, c, p.version)
			}
			wantInit := "100"
			if name == "mps" || name == "fraction" {
				wantInit = "805" // the daemon started a server for the new client
			}
			if p.cuInit != wantInit {
				t.Errorf("%s/%s: cuInit %s, want %s (MPS pipe %s)", name, c, p.cuInit, wantInit, p.mps)
			}
		}
	}
	checkMPSDaemons(t) // the new clients reach the daemons started before

	kubectl(t, "delete", "namespace", userspaceNS, "--wait=true", "--timeout=180s")
	waitNodeClean(t, "after the pods of the upgraded node", nil)
}

const (
	r535Driver     = "535.261.03" // hack/nvidia-userspace.sh
	upgradedDriver = "535.288.01" // the renamed copy's (see TestInPlaceDriverUpgrade)
	libDir         = "usr/lib/x86_64-linux-gnu/nvidia/current"
)

// assembleUpgradedRoot copies the node's driver root to dir with every
// file named for r535Driver renamed to upgradedDriver and the links to
// them retargeted, and rebuilds its ld cache.
func assembleUpgradedRoot(t *testing.T, root, dir string) {
	t.Helper()
	_ = os.RemoveAll(dir)
	if out, err := exec.Command("cp", "-a", root, dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the driver root: %v\n%s", err, out)
	}
	var files, links []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Type()&fs.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil && strings.Contains(target, r535Driver) {
				links = append(links, p)
			}
		case strings.Contains(d.Name(), r535Driver):
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		target, _ := os.Readlink(l)
		if err := os.Remove(l); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(strings.ReplaceAll(target, r535Driver, upgradedDriver), l); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(filepath.Dir(f), strings.ReplaceAll(filepath.Base(f), r535Driver, upgradedDriver))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, libDir, "libnvidia-ml.so."+upgradedDriver)); err != nil || len(links) == 0 {
		t.Fatalf("the upgraded driver root has no libnvidia-ml.so.%s (%v) or no links were retargeted (%d)", upgradedDriver, err, len(links))
	}
	if out, err := exec.Command("ldconfig", "-X", "-r", dir).CombinedOutput(); err != nil {
		t.Fatalf("ldconfig -r %s: %v\n%s", dir, err, out)
	}
	t.Logf("driver root %s: %s with %d files renamed to %s", dir, root, len(files), upgradedDriver)
}

// unstackDriverRoot removes what this test mounted over deploy.sh's driver
// root: every mount there but the first (deploy.sh's bind of the cached
// root).
func unstackDriverRoot(t *testing.T, at string) {
	t.Helper()
	for mountsAt(t, at) > 1 {
		if out, err := exec.Command("umount", "-l", at).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", at, err, out)
			return
		}
	}
}

// mountsAt counts the mounts at a path in this mount namespace.
func mountsAt(t *testing.T, at string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == at {
			n++
		}
	}
	return n
}

// checkSpecDriver: a claim's CDI spec records the driver version want,
// names nothing of version gone, and mounts libcuda of want from where it
// is on disk now.
func checkSpecDriver(t *testing.T, name string, uid types.UID, want, gone string) {
	t.Helper()
	var path string
	for _, s := range driverCDISpecs() {
		if strings.Contains(filepath.Base(s), string(uid)) {
			path = s
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: the CDI spec of claim %s: %v", name, uid, err)
		return
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Errorf("%s: %s: %v", name, path, err)
		return
	}
	if v := spec.Annotations[cdi.DriverVersionAnnotation]; v != want {
		t.Errorf("%s: spec %s records driver %q, want %q", name, filepath.Base(path), v, want)
	}
	if want != gone && strings.Contains(string(data), gone) {
		t.Errorf("%s: spec %s still names %s:\n%s", name, filepath.Base(path), gone, data)
	}
	cuda := false
	for _, m := range spec.ContainerEdits.Mounts {
		if m == nil {
			continue
		}
		if _, err := os.Stat(m.HostPath); err != nil {
			t.Errorf("%s: spec %s mounts %s: %v", name, filepath.Base(path), m.HostPath, err)
		}
		cuda = cuda || filepath.Base(m.HostPath) == "libcuda.so."+want
	}
	if !cuda {
		t.Errorf("%s: spec %s mounts no libcuda.so.%s", name, filepath.Base(path), want)
	}
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting: " + s.Waiting.Reason + " " + s.Waiting.Message
	case s.Terminated != nil:
		return fmt.Sprintf("terminated: %s (%d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "unknown"
}
