package cdi

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi/transform/root"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// NvcdiEdits asks NVIDIA's nvcdi library for the edits of a real driver:
// device nodes (including /dev/nvidiactl and /dev/nvidia-uvm), driver
// libraries, nvidia-smi and the CDI hooks, with the driver root honoured.
// Results are cached: the driver installation does not change while the
// plugin runs, and nvcdi walks the file system to build them.
type NvcdiEdits struct {
	lib    nvcdi.Interface
	toHost transform.Transformer

	commonOnce sync.Once
	common     cdispec.ContainerEdits
	commonErr  error

	mu      sync.Mutex
	devices map[string]cdispec.ContainerEdits
}

// NvcdiOptions locate the driver on the host.
type NvcdiOptions struct {
	DriverRoot string // where the plugin sees the driver's files, e.g. /driver-root
	DevRoot    string // where the plugin sees /dev, usually the driver root
	// HostDriverRoot is where the same files are on the host (e.g. "/" or
	// /run/nvidia/driver): containerd reads the CDI spec on the host, so
	// every path nvcdi found under DriverRoot is rewritten to it.
	HostDriverRoot string
	HookPath       string // nvidia-cdi-hook on the host
}

// NewNvcdiEdits builds the nvcdi-backed edits.
func NewNvcdiEdits(lib nvml.Interface, o NvcdiOptions) (*NvcdiEdits, error) {
	opts := []nvcdi.Option{
		nvcdi.WithNvmlLib(lib),
		nvcdi.WithMode(nvcdi.ModeNvml),
		nvcdi.WithDriverRoot(o.DriverRoot),
		nvcdi.WithDevRoot(o.DevRoot),
	}
	if o.HookPath != "" {
		opts = append(opts, nvcdi.WithNVIDIACDIHookPath(o.HookPath))
	}
	l, err := nvcdi.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("create nvcdi library: %w", err)
	}
	host := o.HostDriverRoot
	if host == "" {
		host = o.DriverRoot
	}
	return &NvcdiEdits{lib: l, toHost: hostPaths(o.DriverRoot, o.DevRoot, host), devices: map[string]cdispec.ContainerEdits{}}, nil
}

// hostPaths rewrites paths under the plugin's view of the driver root to
// the host's.
func hostPaths(driverRoot, devRoot, hostRoot string) transform.Transformer {
	return root.NewDriverTransformer(
		root.WithDriverRoot(driverRoot), root.WithTargetDriverRoot(hostRoot),
		root.WithDevRoot(devRoot), root.WithTargetDevRoot(hostRoot),
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

// ForClaim implements Edits.
func (n *NvcdiEdits) ForClaim([]Device) (cdispec.ContainerEdits, error) {
	n.commonOnce.Do(func() {
		e, err := n.lib.GetCommonEdits()
		if err != nil {
			n.commonErr = err
			return
		}
		n.common, n.commonErr = onHost(n.toHost, *e.ContainerEdits)
	})
	return n.common, n.commonErr
}

// ForDevice implements Edits.
func (n *NvcdiEdits) ForDevice(d Device) (cdispec.ContainerEdits, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.devices[d.UUID]; ok {
		return e, nil
	}
	specs, err := n.lib.GetDeviceSpecsByID(d.UUID)
	if err != nil {
		return cdispec.ContainerEdits{}, err
	}
	if len(specs) != 1 {
		return cdispec.ContainerEdits{}, fmt.Errorf("nvcdi returned %d specs for %s, want 1", len(specs), d.UUID)
	}
	edits, err := onHost(n.toHost, specs[0].ContainerEdits)
	if err != nil {
		return edits, err
	}
	n.devices[d.UUID] = edits
	return edits, nil
}
