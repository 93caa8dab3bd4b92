// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package cdi writes one transient CDI spec per prepared claim. The spec
// exposes exactly the claim's devices; containerd reads it when the kubelet
// passes the returned CDI device IDs. What goes into the spec (device nodes,
// libraries, hooks) comes from an Edits implementation: nvcdi for a real
// driver, simple files for simulated GPUs.
package cdi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// class is the CDI class of every device this driver writes.
const class = "claim"

// maxSpecSize caps what is read of a spec. nvcdi specs of a claim with
// several GPUs are tens of KiB.
const maxSpecSize = 4 << 20

// Device is what the edits need to know about one device.
type Device struct {
	// Name is the DRA device name, unique in the node's pool.
	Name        string
	UUID        string
	ProductName string
	// Minor is the /dev/nvidiaN number of the GPU (the parent for MIG).
	Minor int
	// ParentUUID and MigProfile are set for MIG devices.
	ParentUUID string
	MigProfile string
	// Extra edits added by prepare, e.g. an MPS daemon's pipe and limits.
	Extra cdispec.ContainerEdits
	// VFIO is set for a passthrough device (vfio.go).
	VFIO *VFIO
}

// Edits produces container edits.
type Edits interface {
	// ForClaim returns edits that every container using the claim needs
	// (control devices, libraries, environment).
	ForClaim(devices []Device) (cdispec.ContainerEdits, error)
	// ForDevice returns the edits for one device.
	ForDevice(d Device) (cdispec.ContainerEdits, error)
}

// Writer writes and removes the per-claim specs in one directory.
type Writer struct {
	dir    string
	vendor string
	edits  Edits
	// VFIO says how passthrough devices reach containers (vfio.go).
	VFIO VFIOOptions
}

// NewWriter prepares to write specs for driverName into dir.
func NewWriter(dir, driverName string, edits Edits) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create CDI dir: %w", err)
	}
	w := &Writer{dir: dir, vendor: "k8s." + driverName, edits: edits}
	if err := os.MkdirAll(w.stagingDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create CDI staging dir: %w", err)
	}
	return w, nil
}

// DeviceID is the fully qualified CDI name of a claim's device: what the
// kubelet passes to the runtime, and what prepare records and answers. The
// claim UID makes it unique, so containerd's cache never serves a stale spec.
func (w *Writer) DeviceID(claimUID types.UID, deviceName string) string {
	return parser.QualifiedName(w.vendor, class, specDeviceName(claimUID, deviceName))
}

// specDeviceName is the name of a claim's device inside its spec; DeviceID
// qualifies it.
func specDeviceName(claimUID types.UID, deviceName string) string {
	return string(claimUID) + "-" + deviceName
}

func (w *Writer) specName(claimUID types.UID) string {
	return cdiapi.GenerateTransientSpecName(w.vendor, class, string(claimUID)) + ".json"
}

// SpecPath is where the spec of a claim lives.
func (w *Writer) SpecPath(claimUID types.UID) string {
	return filepath.Join(w.dir, w.specName(claimUID))
}

// Write creates (or replaces) the spec of a claim. Its devices are named so
// that DeviceID gives their CDI IDs. annotations are stored in the spec as
// they are (pkg/checkpoint puts the claim's record there), with the
// version of the driver whose files the edits name (driverfiles.go).
func (w *Writer) Write(claimUID types.UID, devices []Device, annotations map[string]string) error {
	var gpus, vms []Device
	for _, d := range devices {
		if d.VFIO != nil {
			vms = append(vms, d)
		} else {
			gpus = append(gpus, d)
		}
	}
	// Read before the edits are made: a version that changes meanwhile
	// leaves a spec that the next start finds stale, never one that
	// claims to fit a driver it was not made for.
	annotations = w.withDriverVersion(annotations, len(gpus) > 0)
	// The NVIDIA stack's claim-wide edits (control nodes, libraries) only
	// where a device uses it: a VM's GPU is bound to vfio-pci.
	var claimEdits cdispec.ContainerEdits
	if len(gpus) > 0 || len(vms) == 0 {
		e, err := w.edits.ForClaim(gpus)
		if err != nil {
			return fmt.Errorf("claim-wide CDI edits: %w", err)
		}
		claimEdits = e
	}
	if len(vms) > 0 {
		claimEdits = mergeEdits(claimEdits, w.VFIO.claimEdits(vms))
	}
	spec := &cdispec.Spec{
		Kind:           w.vendor + "/" + class,
		Annotations:    annotations,
		ContainerEdits: claimEdits,
	}
	for _, d := range devices {
		if d.VFIO != nil {
			spec.Devices = append(spec.Devices, cdispec.Device{Name: specDeviceName(claimUID, d.Name), ContainerEdits: w.VFIO.deviceEdits(d)})
			continue
		}
		edits, err := w.edits.ForDevice(d)
		if err != nil {
			return fmt.Errorf("CDI edits for device %s: %w", d.Name, err)
		}
		edits.Env = append(edits.Env, d.Extra.Env...)
		edits.Mounts = append(edits.Mounts, d.Extra.Mounts...)
		spec.Devices = append(spec.Devices, cdispec.Device{Name: specDeviceName(claimUID, d.Name), ContainerEdits: edits})
	}
	var err error
	if spec.Version, err = cdispec.MinimumRequiredVersion(spec); err != nil {
		return fmt.Errorf("CDI spec version: %w", err)
	}
	if err := w.writeSpec(claimUID, spec); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// writeSpec writes the spec into a temp file of the driver's staging
// directory (which CDI readers skip), has the CDI library read and
// validate that file exactly as a container runtime will, and renames it
// into place. The temp file is this write's own (created exclusively), so
// a failed write removes it and nothing else, and other claims' writes in
// flight are untouched; what a killed plugin left behind is removed at
// start (RemoveTempFiles).
//
// No fsync: the CDI directory is a tmpfs (/var/run/cdi) that a reboot
// empties, and start-up writes every prepared claim's spec again from its
// record (pkg/prepare restore). Directories are not made again per write:
// NewWriter made them, and a write that finds the staging directory gone
// makes it once more. Only a directory where the spec belongs (it would
// fail the rename) is cleared, after the rename failed.
func (w *Writer) writeSpec(claimUID types.UID, spec *cdispec.Spec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	write := func() error {
		return capfile.WriteAtomicVia(w.stagingDir(), w.SpecPath(claimUID), data, 0o600, false, validate)
	}
	err = write()
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(w.stagingDir(), 0o755); err != nil {
			return err
		}
		err = write()
	}
	if err != nil && w.clearNonRegular(claimUID) {
		err = write()
	}
	return err
}

// validate has the CDI library read a spec file as containerd does.
func validate(path string) error {
	_, err := cdiapi.ReadSpec(path, 0)
	return err
}

func (w *Writer) stagingDir() string { return filepath.Join(w.dir, "."+w.vendor+"-staging") }

// RemoveTempFiles removes what writes that a killed plugin never finished
// left in the staging directory. Call it before serving, when no write is
// in flight.
func (w *Writer) RemoveTempFiles() (int, error) {
	entries, err := os.ReadDir(w.stagingDir())
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(w.stagingDir(), e.Name())); err != nil {
			return 0, err
		}
	}
	return len(entries), nil
}

// Remove deletes the spec of a claim; a missing spec is not an error. A
// directory where the spec belongs is removed whole.
func (w *Writer) Remove(claimUID types.UID) error {
	err := capfile.Remove(w.SpecPath(claimUID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if w.clearNonRegular(claimUID) {
			return nil
		}
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}

// clearNonRegular removes whatever is not a regular file (a directory)
// where a claim's spec belongs, which fails every write and removal, and
// reports whether it removed something. The path is the driver's own,
// built from a validated claim UID. It is called after a failure only.
func (w *Writer) clearNonRegular(claimUID types.UID) bool {
	st, err := os.Lstat(w.SpecPath(claimUID))
	return err == nil && !st.Mode().IsRegular() && os.RemoveAll(w.SpecPath(claimUID)) == nil
}

// StagingDir is the driver's own directory in the CDI directory, which
// CDI readers skip: a temp file of a write into the CDI directory goes
// there (start-up removes what a killed write left).
func (w *Writer) StagingDir() string { return w.stagingDir() }

// Annotations returns the annotations of a claim's spec when the spec is
// on disk, parses, names this driver's kind and has devices. A spec that
// fails any of it would keep the claim's containers from starting.
func (w *Writer) Annotations(claimUID types.UID) (map[string]string, bool) {
	spec, err := w.read(w.SpecPath(claimUID))
	if err != nil || spec.Kind != w.vendor+"/"+class || len(spec.Devices) == 0 {
		return nil, false
	}
	return spec.Annotations, true
}

// ClaimSpec is a spec found on disk.
type ClaimSpec struct {
	UID types.UID
	// Annotations are the spec's; nil when it does not parse.
	Annotations map[string]string
}

// List returns every claim spec this driver wrote into the directory.
// Unreadable specs are returned without annotations so the caller can
// remove them.
func (w *Writer) List() ([]ClaimSpec, error) {
	prefix := cdiapi.GenerateTransientSpecName(w.vendor, class, "")
	entries, err := os.ReadDir(w.dir)
	if err != nil {
		return nil, err
	}
	var out []ClaimSpec
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".json") {
			continue
		}
		uid := types.UID(strings.TrimSuffix(strings.TrimPrefix(name, prefix), ".json"))
		if !validUID(string(uid)) {
			continue // not a name this driver writes
		}
		cs := ClaimSpec{UID: uid}
		if spec, err := w.read(filepath.Join(w.dir, name)); err == nil {
			cs.Annotations = spec.Annotations
		}
		out = append(out, cs)
	}
	return out, nil
}

// uidPattern is what a claim UID taken from a spec's file name may look
// like: the name is used as a path again (to read and remove the spec), so
// it must never name "..", a path separator or the empty string. It is the
// rule pkg/checkpoint applies to the UIDs it records.
var uidPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validUID(s string) bool { return uidPattern.MatchString(s) }

func (w *Writer) read(path string) (*cdispec.Spec, error) {
	data, err := capfile.Read(path, maxSpecSize)
	if err != nil {
		return nil, err
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, err
	}
	return &spec, nil
}
