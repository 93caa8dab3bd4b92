package cdi

import (
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/nvcdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// NvcdiEdits asks NVIDIA's nvcdi library for the edits of a real driver:
// device nodes (including /dev/nvidiactl and /dev/nvidia-uvm), driver
// libraries, nvidia-smi and the CDI hooks, with the driver root honoured.
// Results are cached: the driver installation does not change while the
// plugin runs, and nvcdi walks the file system to build them.
type NvcdiEdits struct {
	lib nvcdi.Interface

	commonOnce sync.Once
	common     cdispec.ContainerEdits
	commonErr  error

	mu      sync.Mutex
	devices map[string]cdispec.ContainerEdits
}

// NvcdiOptions locate the driver on the host.
type NvcdiOptions struct {
	DriverRoot string // where the driver's files are, e.g. "/" or "/run/nvidia/driver"
	DevRoot    string // where /dev is, usually the driver root
	HookPath   string // nvidia-cdi-hook on the host
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
	return &NvcdiEdits{lib: l, devices: map[string]cdispec.ContainerEdits{}}, nil
}

// ForClaim implements Edits.
func (n *NvcdiEdits) ForClaim([]Device) (cdispec.ContainerEdits, error) {
	n.commonOnce.Do(func() {
		e, err := n.lib.GetCommonEdits()
		if err != nil {
			n.commonErr = err
			return
		}
		n.common = *e.ContainerEdits
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
	n.devices[d.UUID] = specs[0].ContainerEdits
	return specs[0].ContainerEdits, nil
}
