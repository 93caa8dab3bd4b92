// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The README's Security section promises: no world-writable file or
// directory anywhere the plugin writes, its sockets 0750 or tighter, and its
// own data directory 0750 even where the kubelet created it 0755 (hostPath
// DirectoryOrCreate does). The plugin runs under umask 0 here, so that a
// mode the code does not set itself shows up instead of being masked by
// the usual 022.
func TestFilesAndSocketsAreNotOpenToOthers(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	root, err := os.MkdirTemp("", "gdra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	// As the kubelet leaves a hostPath DirectoryOrCreate volume.
	if err := os.Mkdir(filepath.Join(root, "plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := newNodeAt(t, root, "h100x3", true)

	// Exercise every writer: a whole GPU under MPS (daemon dir, pid file,
	// settings), a MIG device (simulated MIG state and caps), a whole GPU
	// under time-slicing (compute policy; MIG devices only take Default),
	// and the CDI specs and checkpoint of all three.
	n.mustPrepare(n.claim("mps", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`))
	n.mustPrepare(n.claim("mig", []string{"gpu-0-mig-1g10gb-19-0"}))
	n.mustPrepare(n.claim("ts", []string{"gpu-2"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`))

	sockets := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		mode := info.Mode()
		rel, _ := filepath.Rel(root, path)
		switch {
		case mode&fs.ModeSymlink != 0:
			// A symlink's own mode is always 0777 and never checked.
		case mode&fs.ModeSocket != 0 && strings.HasPrefix(rel, "state/mps/") && filepath.Base(filepath.Dir(rel)) == "pipe":
			// The MPS control socket: the workload's containers, under any
			// uid, connect to it through their bind mount of the pipe dir,
			// as they do to nvidia-cuda-mps-control's own. Not the plugin's.
		case mode&fs.ModeSocket != 0:
			sockets++
			if mode.Perm()&^0o750 != 0 {
				t.Errorf("socket %s has mode %v, want 0750 or tighter", rel, mode.Perm())
			}
		case mode.Perm()&0o002 != 0:
			t.Errorf("%s is world-writable (%v)", rel, mode.Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// dra.sock and the registration socket.
	if sockets < 2 {
		t.Errorf("found %d sockets under %s, want the plugin's and the registrar's", sockets, root)
	}
	info, err := os.Stat(filepath.Join(root, "plugin"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o750 {
		t.Errorf("plugin data dir has mode %v, want 0750", info.Mode().Perm())
	}
}
