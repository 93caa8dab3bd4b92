// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform/root"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// NvcdiEdits asks NVIDIA's nvcdi library for the edits of a real driver:
// device nodes (including /dev/nvidiactl and /dev/nvidia-uvm), driver
// libraries, nvidia-smi and the CDI hooks, with the driver root honoured.
//
// nvcdi walks the file system for every answer, so answers are cached, but
// only for the driver version NVML reports: when it changes (the driver was
// upgraded under a running plugin) the cache is dropped and nvcdi starts
// afresh, because library names carry the version. Failures are never
// cached; the next prepare asks again.
//
// A MIG device gets its parent GPU's edits plus the nvidia-caps device
// nodes of its GPU instance and compute instance, built from the driver's
// /proc/driver/nvidia/capabilities files (see migcaps.go). nvcdi's own MIG
// edits would omit those nodes whenever they are missing under the dev
// root, and they usually are: NVML creates them on demand in the /dev of
// the process that created the instance (the plugin's container), not on
// the host.
type NvcdiEdits struct {
	nvml     nvml.Interface
	opts     NvcdiOptions
	toHost   transform.Transformer
	newLib   func() (nvcdi.Interface, error)
	procRoot string

	mu      sync.Mutex
	version string // driver version the cached answers belong to
	lib     nvcdi.Interface
	common  *cdispec.ContainerEdits
	gpus    map[string]cdispec.ContainerEdits // by GPU UUID
}

// NvcdiOptions locate the driver on the host.
type NvcdiOptions struct {
	DriverRoot string // where the plugin sees the driver's files, e.g. /driver-root
	// DevRoot is where the plugin sees the driver's /dev. Empty: the
	// driver root when it has a /dev directory, "/" otherwise (a
	// containerized driver whose root holds no device nodes).
	DevRoot string
	// HostDriverRoot is where the same files are on the host (e.g. "/" or
	// /run/nvidia/driver): containerd reads the CDI spec on the host, so
	// every path nvcdi found under DriverRoot is rewritten to it.
	HostDriverRoot string
	HookPath       string // nvidia-cdi-hook on the host; empty for nvcdi's default
	// ProcRoot is where procfs is mounted (default /proc): MIG capability
	// files and the nvidia-caps device major are read below it.
	ProcRoot string
}

// DevRootFor returns the dev root for a driver root: the driver root
// itself when it has a /dev directory, otherwise "/".
func DevRootFor(driverRoot string) string {
	if st, err := os.Stat(filepath.Join(driverRoot, "dev")); err == nil && st.IsDir() {
		return driverRoot
	}
	return "/"
}

// NewNvcdiEdits builds the nvcdi-backed edits. lib must be initialized.
func NewNvcdiEdits(lib nvml.Interface, o NvcdiOptions) (*NvcdiEdits, error) {
	if o.DriverRoot == "" {
		o.DriverRoot = "/"
	}
	if o.DevRoot == "" {
		o.DevRoot = DevRootFor(o.DriverRoot)
	}
	if o.HostDriverRoot == "" {
		o.HostDriverRoot = o.DriverRoot
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	n := &NvcdiEdits{
		nvml:     lib,
		opts:     o,
		toHost:   hostPaths(o.DriverRoot, o.DevRoot, o.HostDriverRoot),
		procRoot: o.ProcRoot,
		gpus:     map[string]cdispec.ContainerEdits{},
	}
	n.newLib = func() (nvcdi.Interface, error) {
		opts := []nvcdi.Option{
			nvcdi.WithNvmlLib(lib),
			nvcdi.WithMode(nvcdi.ModeNvml),
			nvcdi.WithDriverRoot(o.DriverRoot),
			nvcdi.WithDevRoot(o.DevRoot),
			nvcdi.WithLogger(klogLogger{}),
			// The version comes from NVML alone, the one this cache is
			// keyed on (nvsandboxutils would be a second source).
			nvcdi.WithFeatureFlags(nvcdi.FeatureDisableNvsandboxUtils),
		}
		if o.HookPath != "" {
			opts = append(opts, nvcdi.WithNVIDIACDIHookPath(o.HookPath))
		}
		l, err := nvcdi.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("create nvcdi library: %w", err)
		}
		return l, nil
	}
	// Fail early on options nvcdi rejects; the driver itself is only
	// consulted at prepare time.
	if _, err := n.newLib(); err != nil {
		return nil, err
	}
	return n, nil
}

// hostPaths rewrites paths under the plugin's view of the driver root to
// the host's. A dev root other than the driver root (the "/" fallback) is
// the same path on the host.
func hostPaths(driverRoot, devRoot, hostRoot string) transform.Transformer {
	targetDev := hostRoot
	if filepath.Clean(devRoot) != filepath.Clean(driverRoot) {
		targetDev = devRoot
	}
	return root.NewDriverTransformer(
		root.WithDriverRoot(driverRoot), root.WithTargetDriverRoot(hostRoot),
		root.WithDevRoot(devRoot), root.WithTargetDevRoot(targetDev),
	)
}

// onHost applies a transformer to container edits.
func onHost(t transform.Transformer, e cdispec.ContainerEdits) (cdispec.ContainerEdits, error) {
	spec := &cdispec.Spec{ContainerEdits: e}
	if err := t.Transform(spec); err != nil {
		return e, fmt.Errorf("rewrite driver paths for the host: %w", err)
	}
	return spec.ContainerEdits, nil
}

// current returns the nvcdi library for the driver version NVML reports
// now, dropping every cached answer when the version changed. Callers hold
// n.mu.
func (n *NvcdiEdits) current() (nvcdi.Interface, error) {
	version, ret := n.nvml.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("read the driver version from NVML: %v", ret)
	}
	if n.lib != nil && version == n.version {
		return n.lib, nil
	}
	lib, err := n.newLib()
	if err != nil {
		return nil, err
	}
	if n.version != "" {
		klog.InfoS("NVIDIA driver version changed; CDI edits are built afresh", "from", n.version, "to", version)
	}
	n.lib, n.version, n.common, n.gpus = lib, version, nil, map[string]cdispec.ContainerEdits{}
	return lib, nil
}

// ForClaim implements Edits.
func (n *NvcdiEdits) ForClaim([]Device) (cdispec.ContainerEdits, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lib, err := n.current()
	if err != nil {
		return cdispec.ContainerEdits{}, err
	}
	if n.common == nil {
		e, err := lib.GetCommonEdits()
		if err != nil {
			return cdispec.ContainerEdits{}, fmt.Errorf("nvcdi common edits: %w", err)
		}
		edits, err := onHost(n.toHost, *e.ContainerEdits)
		if err != nil {
			return cdispec.ContainerEdits{}, err
		}
		n.common = &edits
	}
	return clip(*n.common), nil
}

// ForDevice implements Edits.
func (n *NvcdiEdits) ForDevice(d Device) (cdispec.ContainerEdits, error) {
	if d.ParentUUID == "" {
		return n.gpuEdits(d.UUID)
	}
	edits, err := n.gpuEdits(d.ParentUUID)
	if err != nil {
		return edits, err
	}
	nodes, err := n.migCapNodes(d)
	if err != nil {
		return cdispec.ContainerEdits{}, err
	}
	edits.DeviceNodes = append(edits.DeviceNodes, nodes...)
	return edits, nil
}

// gpuEdits returns the edits of a whole GPU, cached for the driver version.
func (n *NvcdiEdits) gpuEdits(uuid string) (cdispec.ContainerEdits, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lib, err := n.current()
	if err != nil {
		return cdispec.ContainerEdits{}, err
	}
	if e, ok := n.gpus[uuid]; ok {
		return clip(e), nil
	}
	specs, err := lib.GetDeviceSpecsByID(uuid)
	if err != nil {
		return cdispec.ContainerEdits{}, fmt.Errorf("nvcdi edits for %s: %w", uuid, err)
	}
	if len(specs) != 1 {
		return cdispec.ContainerEdits{}, fmt.Errorf("nvcdi returned %d specs for %s, want 1", len(specs), uuid)
	}
	edits, err := onHost(n.toHost, specs[0].ContainerEdits)
	if err != nil {
		return edits, err
	}
	n.gpus[uuid] = edits
	return clip(edits), nil
}

// migCapNodes returns the nvidia-caps device nodes of a MIG device's GPU
// instance and compute instance, whose IDs NVML reports for its UUID.
func (n *NvcdiEdits) migCapNodes(d Device) ([]*cdispec.DeviceNode, error) {
	h, ret := n.nvml.DeviceGetHandleByUUID(d.UUID)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("MIG device %s: %v", d.UUID, ret)
	}
	gi, ret := h.GetGpuInstanceId()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("MIG device %s: GPU instance ID: %v", d.UUID, ret)
	}
	ci, ret := h.GetComputeInstanceId()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("MIG device %s: compute instance ID: %v", d.UUID, ret)
	}
	nodes, err := MigCapDeviceNodes(n.procRoot, d.Minor, gi, ci)
	if err != nil {
		return nil, fmt.Errorf("MIG device %s: %w", d.UUID, err)
	}
	return nodes, nil
}

// clip returns edits whose slices the caller may append to without
// touching the cached ones.
func clip(e cdispec.ContainerEdits) cdispec.ContainerEdits {
	e.Env = slices.Clip(e.Env)
	e.DeviceNodes = slices.Clip(e.DeviceNodes)
	e.Hooks = slices.Clip(e.Hooks)
	e.Mounts = slices.Clip(e.Mounts)
	e.AdditionalGIDs = slices.Clip(e.AdditionalGIDs)
	return e
}

// klogLogger routes nvcdi's messages to klog: warnings at level 2 (nvcdi
// warns about every optional file a driver does not ship), the rest lower.
type klogLogger struct{}

func (klogLogger) Debugf(f string, a ...any)   { klog.V(5).Infof("nvcdi: "+f, a...) }
func (klogLogger) Tracef(f string, a ...any)   { klog.V(6).Infof("nvcdi: "+f, a...) }
func (klogLogger) Infof(f string, a ...any)    { klog.V(3).Infof("nvcdi: "+f, a...) }
func (klogLogger) Warningf(f string, a ...any) { klog.V(2).Infof("nvcdi: "+f, a...) }
func (klogLogger) Errorf(f string, a ...any)   { klog.Errorf("nvcdi: "+f, a...) }
