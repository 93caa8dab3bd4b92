// Package cdi writes one transient CDI spec per prepared claim. The spec
// exposes exactly the claim's devices; containerd reads it when the kubelet
// passes the returned CDI device IDs. What goes into the spec (device nodes,
// libraries, hooks) comes from an Edits implementation: nvcdi for a real
// driver, simple files for simulated GPUs.
package cdi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// Class is the CDI class of every device this driver writes.
const Class = "claim"

// ClaimAnnotation carries the driver's own record of the claim inside the
// spec, so that a lost checkpoint can be rebuilt from the specs on disk.
const ClaimAnnotation = "gpu.nvidia.com/prepared-claim"

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
	cache  *cdiapi.Cache
	dir    string
	vendor string
	edits  Edits
}

// NewWriter prepares to write specs for driverName into dir.
func NewWriter(dir, driverName string, edits Edits) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create CDI dir: %w", err)
	}
	// No auto-refresh: this process only writes; containerd reads.
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("open CDI dir %s: %w", dir, err)
	}
	return &Writer{cache: cache, dir: dir, vendor: "k8s." + driverName, edits: edits}, nil
}

// DeviceID is the fully qualified CDI name of a claim's device. The claim
// UID makes it unique, so containerd's cache never serves a stale spec.
func (w *Writer) DeviceID(claimUID types.UID, deviceName string) string {
	return parser.QualifiedName(w.vendor, Class, string(claimUID)+"-"+deviceName)
}

func (w *Writer) specName(claimUID types.UID) string {
	return cdiapi.GenerateTransientSpecName(w.vendor, Class, string(claimUID)) + ".json"
}

// SpecPath is where the spec of a claim lives.
func (w *Writer) SpecPath(claimUID types.UID) string {
	return filepath.Join(w.dir, w.specName(claimUID))
}

// Write creates (or replaces) the spec of a claim and returns the CDI ID of
// each device, in order. record is stored as an annotation.
func (w *Writer) Write(claimUID types.UID, devices []Device, record any) ([]string, error) {
	claimEdits, err := w.edits.ForClaim(devices)
	if err != nil {
		return nil, fmt.Errorf("claim-wide CDI edits: %w", err)
	}
	spec := &cdispec.Spec{
		Kind:           w.vendor + "/" + Class,
		ContainerEdits: claimEdits,
	}
	if record != nil {
		data, err := json.Marshal(record)
		if err != nil {
			return nil, err
		}
		spec.Annotations = map[string]string{ClaimAnnotation: string(data)}
	}
	ids := make([]string, 0, len(devices))
	for _, d := range devices {
		edits, err := w.edits.ForDevice(d)
		if err != nil {
			return nil, fmt.Errorf("CDI edits for device %s: %w", d.Name, err)
		}
		edits.Env = append(edits.Env, d.Extra.Env...)
		edits.Mounts = append(edits.Mounts, d.Extra.Mounts...)
		spec.Devices = append(spec.Devices, cdispec.Device{Name: string(claimUID) + "-" + d.Name, ContainerEdits: edits})
		ids = append(ids, w.DeviceID(claimUID, d.Name))
	}
	if spec.Version, err = cdispec.MinimumRequiredVersion(spec); err != nil {
		return nil, fmt.Errorf("CDI spec version: %w", err)
	}
	if err := w.cache.WriteSpec(spec, w.specName(claimUID)); err != nil {
		return nil, fmt.Errorf("write CDI spec: %w", err)
	}
	return ids, nil
}

// Remove deletes the spec of a claim; a missing spec is not an error.
func (w *Writer) Remove(claimUID types.UID) error {
	if err := w.cache.RemoveSpec(w.specName(claimUID)); err != nil {
		return fmt.Errorf("remove CDI spec: %w", err)
	}
	return nil
}

// Exists reports whether the spec of a claim is on disk.
func (w *Writer) Exists(claimUID types.UID) bool {
	_, err := os.Stat(w.SpecPath(claimUID))
	return err == nil
}

// ClaimSpec is a spec found on disk.
type ClaimSpec struct {
	UID types.UID
	// Record is the ClaimAnnotation value; empty when missing.
	Record string
}

// List returns every claim spec this driver wrote into the directory.
// Unreadable specs are returned with an empty record so the caller can
// remove them.
func (w *Writer) List() ([]ClaimSpec, error) {
	prefix := cdiapi.GenerateTransientSpecName(w.vendor, Class, "")
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
		cs := ClaimSpec{UID: uid}
		if data, err := os.ReadFile(filepath.Join(w.dir, name)); err == nil {
			var spec cdispec.Spec
			if json.Unmarshal(data, &spec) == nil {
				cs.Record = spec.Annotations[ClaimAnnotation]
			}
		}
		out = append(out, cs)
	}
	return out, nil
}
