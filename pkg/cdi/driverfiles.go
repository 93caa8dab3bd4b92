// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"
)

// A spec made by nvcdi names the files of the driver installed when it
// was written: libcuda.so.<version> and its siblings, nvidia-smi, and hook
// arguments such as enable-cuda-compat --host-driver-version. The GPU
// Operator's driver container upgrades the driver in place (unload, new
// version, load) without a reboot, so the boot ID, the GPUs' UUIDs,
// minors and addresses all stay, while the old version's libraries are
// deleted. A spec written before is then one no container can start
// with: containerd fails on the missing mount sources. So a spec records
// the driver version it was written for, and start checks it (and the
// driver files the spec mounts) against the driver on disk now
// (DriverStale), and rewrites the spec where they differ.

// DriverVersionAnnotation records the NVIDIA driver version a spec's edits
// were made for. Specs written before it existed are checked by the
// driver files they mount alone.
const DriverVersionAnnotation = "gpu.nvidia.com/driver-version"

// DriverFiles is implemented by edits whose specs name an installed
// driver's files (nvcdi's). Simulated edits name none: their specs do not
// depend on a driver.
type DriverFiles interface {
	// DriverVersion is the version of the driver loaded now.
	DriverVersion() (string, error)
	// OnDisk reports whether a host path that a spec mounts is on disk
	// now; known is false for a path outside the driver root, which
	// says nothing about the driver.
	OnDisk(hostPath string) (present, known bool)
}

// DriverVersion implements DriverFiles: the version NVML reports, the one
// the edits' cache is keyed on.
func (n *NvcdiEdits) DriverVersion() (string, error) {
	version, ret := n.nvml.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("read the driver version from NVML: %v", ret)
	}
	return version, nil
}

// OnDisk implements DriverFiles. Specs carry host paths (HostDriverRoot);
// the plugin sees the same files under DriverRoot.
func (n *NvcdiEdits) OnDisk(hostPath string) (bool, bool) {
	rel, ok := under(n.opts.HostDriverRoot, hostPath)
	if !ok {
		return false, false
	}
	_, err := os.Stat(filepath.Join(n.opts.DriverRoot, rel))
	return err == nil, true
}

// under returns path relative to root when path is root or below it.
func under(root, path string) (string, bool) {
	root, path = filepath.Clean(root), filepath.Clean(path)
	if !filepath.IsAbs(path) {
		return "", false
	}
	if root == "/" {
		return strings.TrimPrefix(path, "/"), true
	}
	if path == root {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, root+"/")
	return rel, ok
}

// withDriverVersion returns annotations plus the version of the driver
// the edits name, for a spec that uses the driver (a GPU that is not a
// VM's); the caller's map is not changed.
func (w *Writer) withDriverVersion(annotations map[string]string, usesDriver bool) map[string]string {
	files, ok := w.edits.(DriverFiles)
	if !ok || !usesDriver {
		return annotations
	}
	version, err := files.DriverVersion()
	if err != nil {
		return annotations // the edits fail on it too; nothing to record
	}
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	out[DriverVersionAnnotation] = version
	return out
}

// DriverStale says why a claim's spec on disk does not fit the driver
// installed now, as a phrase whose subject is the spec: it was written for
// another driver version, or it mounts a driver file that is gone. It returns "" when the spec fits, when there
// is no readable spec (the caller rewrites one anyway), when the edits
// name no driver files (simulated GPUs), and when NVML cannot tell the
// version (the rewrite would fail on it too).
func (w *Writer) DriverStale(claimUID types.UID) string {
	files, ok := w.edits.(DriverFiles)
	if !ok {
		return ""
	}
	spec, err := w.read(w.SpecPath(claimUID))
	if err != nil {
		return ""
	}
	now, err := files.DriverVersion()
	if err != nil {
		return ""
	}
	if written, ok := spec.Annotations[DriverVersionAnnotation]; ok && written != now {
		return fmt.Sprintf("was written for NVIDIA driver %s, and the node runs %s", written, now)
	}
	// The claim-wide mounts are the driver's files (nvcdi's common edits:
	// libraries, binaries, firmware); a device's own mounts are not (an
	// MPS daemon's pipe directory), nor a simulated VM's device files.
	for _, m := range spec.ContainerEdits.Mounts {
		if m == nil || (w.VFIO.SimulatedDevDir != "" && isUnder(w.VFIO.SimulatedDevDir, m.HostPath)) {
			continue
		}
		if present, known := files.OnDisk(m.HostPath); known && !present {
			return fmt.Sprintf("mounts %s, which is no longer on disk (the node runs NVIDIA driver %s)", m.HostPath, now)
		}
	}
	return ""
}

func isUnder(root, path string) bool {
	_, ok := under(root, path)
	return ok
}
