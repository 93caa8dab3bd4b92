// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// unmount is unix.Unmount; tests replace it to give the EPERM a container
// without CAP_SYS_ADMIN gets.
var unmount = unix.Unmount

// removeMPSDir removes the directory of one of NVIDIA's MPS control
// daemons (<plugin dir>/mps/<id>). NVIDIA's plugin mounts a tmpfs at its
// shm/ for the daemon's and its clients' /dev/shm (sharing.go,
// MpsControlDaemon.Start, at 95932046), on the host and before this
// plugin's container started, so the container holds a copy of that
// mount. How much can go depends on CAP_SYS_ADMIN:
//
//   - With it (the chart's privileged container on real GPUs), the copy is
//     unmounted and the directory removed. Removing a directory that is a
//     mount point only in other mount namespaces detaches those mounts,
//     the host's included (Linux 3.18 and later: vfs_rmdir refuses only a
//     mount point of the caller's own namespace).
//   - Without it (simulated GPUs, kubeletPlugin.privileged=false without
//     SYS_ADMIN), nothing in the container can remove the mount. Its
//     files are removed, and everything else of the directory; their
//     memory is freed once no process holds them, that is once the
//     daemon pod whose Deployment was just deleted has exited (its
//     clients' pods are gone already: the kubelet unprepares a claim after
//     its pods). The empty mount stays until the node reboots or an admin
//     unmounts it.
//     Its path is returned for the caller to say so. The GPU is released
//     either way: nothing uses the mount any more.
func removeMPSDir(dir string) (left string, err error) {
	shm := filepath.Join(dir, "shm")
	mounted, err := isMountPoint(shm)
	if err != nil || !mounted {
		if err == nil {
			err = os.RemoveAll(dir)
		}
		return "", err
	}
	err = unmount(shm, 0)
	if errors.Is(err, unix.EINVAL) {
		// Unmounted meanwhile, or a mount the container may not unmount
		// even with CAP_SYS_ADMIN (locked, in a user namespace): which,
		// only another look tells.
		if still, serr := isMountPoint(shm); serr == nil && still {
			err = unix.EPERM
		} else {
			err = nil
		}
	}
	switch {
	case err == nil:
		return "", os.RemoveAll(dir)
	case errors.Is(err, unix.EPERM):
		if err := removeAllBut(shm, dir); err != nil {
			return "", err
		}
		if err := removeContents(shm); err != nil {
			return "", fmt.Errorf("empty NVIDIA's MPS tmpfs %s: %w", shm, err)
		}
		return shm, nil
	default:
		return "", fmt.Errorf("unmount %s: %w", shm, err)
	}
}

// isMountPoint says whether path is a mount point: a device of its own
// under its parent's. A missing path is not.
func isMountPoint(path string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := unix.Lstat(filepath.Dir(path), &parent); err != nil {
		return false, fmt.Errorf("stat the parent of %s: %w", path, err)
	}
	return st.Dev != parent.Dev, nil
}

// removeAllBut removes every entry of dir except keep: keep is a mount
// point this container may not unmount, and removing a mount point of its
// own namespace fails (EBUSY), so it is left and the rest goes.
func removeAllBut(keep, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if p := filepath.Join(dir, e.Name()); p != keep {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeContents empties dir, a tmpfs that stays mounted, so that its
// memory is freed though the mount cannot go.
func removeContents(dir string) error {
	return removeAllBut("", dir)
}
