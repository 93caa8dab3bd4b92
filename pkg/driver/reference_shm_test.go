// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
)

// mountTmpfs mounts a small tmpfs at dir, as NVIDIA's plugin does at an
// MPS daemon's shm/, with one file in it; the test is skipped, saying
// why, where this process may not mount (not root).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("SKIP: mounting a tmpfs needs root (CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if mounted, _ := isMountPoint(dir); mounted {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cuda.shm.0"), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReferenceMPSReleaseWithoutSysAdmin (issue 58, found by the live
// switch check): NVIDIA's plugin mounts a tmpfs at its MPS daemon's shm/.
// This plugin's container on simulated GPUs, or with
// kubeletPlugin.privileged=false, has no CAP_SYS_ADMIN, so unmounting it
// fails with EPERM. On main every kubelet retry of the unprepare failed
// on that, the claim stayed held and the pod never ended. Now the daemon
// is stopped, the tmpfs emptied (its memory freed), the rest of the
// directory removed and the claim released; only the empty mount stays,
// and the log says where.
func TestReferenceMPSReleaseWithoutSysAdmin(t *testing.T) {
	r := newReferenceNodeFrom(t, "h100x4", "checkpoint-sharing.json", nil)
	ctx := context.Background()
	id := r.claims["nvd-mps"].MPSDaemons[0]
	if _, err := r.in.Client.AppsV1().Deployments(nvidiaNamespace).Create(ctx, nvidiaMPSDeployment(nvidiaNamespace, id), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := refdriver.MPSDir(r.in.Dir("plugin"), id)
	for _, sub := range []string{"pipe", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shm := filepath.Join(dir, "shm")
	mountTmpfs(t, shm)
	chartDeploymentRBAC(r)
	calls := 0
	unmount = func(string, int) error { calls++; return unix.EPERM }
	t.Cleanup(func() { unmount = unix.Unmount })

	d := startReferenceWith(t, r, func(c *Config) { c.ReferenceNamespace = nvidiaNamespace })
	if err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-mps")); err != nil {
		t.Fatalf("unprepare of NVIDIA's MPS claim without CAP_SYS_ADMIN: %v", err)
	}
	if calls == 0 {
		t.Error("the tmpfs was never tried to be unmounted")
	}
	uid := types.UID(r.claims["nvd-mps"].UID)
	if _, held := d.state.Ledger.Foreign(uid); held {
		t.Errorf("NVIDIA's MPS claim %s is still held after its unprepare", uid)
	}
	if mounted, err := isMountPoint(shm); err != nil || !mounted {
		t.Fatalf("the tmpfs at %s: mounted %v (%v); the test's stand-in for EPERM should have left it", shm, mounted, err)
	}
	if entries, err := os.ReadDir(shm); err != nil || len(entries) != 0 {
		t.Errorf("NVIDIA's tmpfs still holds %d entries (%v): its memory is not freed", len(entries), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "shm" {
		t.Errorf("the daemon's directory holds %v, want only the emptied mount shm", names)
	}
}

// TestRemoveMPSDirDetachesTheHostsMount: with CAP_SYS_ADMIN (the chart's
// privileged container on real GPUs), the container unmounts its copy of
// NVIDIA's tmpfs and removes the directory, and that detaches the host's
// mount too. The container is stood in for by a thread in a mount
// namespace of its own whose mounts are private copies (the plugin's
// host paths are mounted without propagation); the host is the test's
// own namespace.
func TestRemoveMPSDirDetachesTheHostsMount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mps", "0c3f5e1a-1be9f")
	shm := filepath.Join(dir, "shm")
	mountTmpfs(t, shm)
	if err := os.MkdirAll(filepath.Join(dir, "pipe"), 0o755); err != nil {
		t.Fatal(err)
	}
	type result struct {
		left string
		err  error
		skip string
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, and its
		// namespace with it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- result{skip: "unshare(CLONE_NEWNS): " + err.Error()}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- result{skip: "make the new namespace's mounts private: " + err.Error()}
			return
		}
		left, err := removeMPSDir(dir)
		done <- result{left: left, err: err}
	}()
	res := <-done
	if res.skip != "" {
		t.Skipf("SKIP: no mount namespace of its own: %s", res.skip)
	}
	if res.err != nil || res.left != "" {
		t.Fatalf("removeMPSDir with CAP_SYS_ADMIN: left %q, %v; want all gone", res.left, res.err)
	}
	// This goroutine is not on the locked thread, so it sees the host's
	// namespace.
	info, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(info), " "+shm+" ") {
		t.Errorf("the host's tmpfs at %s is still mounted after the directory was removed", shm)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the daemon's directory %s is still there: %v", dir, err)
	}
}

// TestRemoveMPSDirLockedMount: a container with CAP_SYS_ADMIN in a user
// namespace of its own may not unmount a mount it was given (locked):
// umount answers EINVAL, as for a mount that is gone. Taking that for
// gone made every retry fail on the mount point's removal (EBUSY); the
// tmpfs is emptied and left as without CAP_SYS_ADMIN.
func TestRemoveMPSDirLockedMount(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mps", "0c3f5e1a-1be9f")
	shm := filepath.Join(dir, "shm")
	mountTmpfs(t, shm)
	unmount = func(string, int) error { return unix.EINVAL }
	t.Cleanup(func() { unmount = unix.Unmount })
	left, err := removeMPSDir(dir)
	if err != nil || left != shm {
		t.Fatalf("removeMPSDir on a mount umount calls invalid: left %q, %v; want %s left, emptied", left, err, shm)
	}
	if entries, err := os.ReadDir(shm); err != nil || len(entries) != 0 {
		t.Errorf("the tmpfs holds %d entries (%v), want none", len(entries), err)
	}
}
