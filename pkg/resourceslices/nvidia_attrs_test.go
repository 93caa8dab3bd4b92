// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// r580 is the driver of the A100 example in NVIDIA's reference driver's
// attribute reference (site/content/docs/reference/
// resourceslice-attributes.md, 95932046), with its CUDA 13.0: a driver
// whose NVML answers nvmlDeviceGetAddressingMode.
const (
	r580     = "580.126.20"
	r580Cuda = 13000
)

// simulatedNodeOn discovers a simulated node whose NVML reports driver
// (and CUDA) versions other than the simulator's default, as a node that
// installed that driver would.
func simulatedNodeOn(t *testing.T, profile, driver string, cuda int) (*simulate.Simulator, *nvdev.Inventory) {
	t.Helper()
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	sim.DriverVersion, sim.NvmlVersion, sim.CudaDriverVersion = driver, "13."+driver, cuda
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	return sim, inv
}

// nvidiaAttributes are the attributes NVIDIA's reference driver publishes
// (cmd/gpu-kubelet-plugin, 95932046): GpuInfo.Attributes in deviceinfo.go
// for a GPU, CommonAttributesMig in mig.go for a MIG device (a static one
// adds uuid), each with its value type. Its Fabric Manager attributes
// (gpuModuleID, partitionN) need its FabricManagerPartitioning gate and a
// Fabric Manager, which simulated nodes have not.
var nvidiaAttributes = map[string]map[string]string{
	deviceattr.TypeGPU: {
		"type": "string", "uuid": "string", "productName": "string", "brand": "string", "architecture": "string",
		"cudaComputeCapability": "version", "driverVersion": "version", "cudaDriverVersion": "version",
		"addressingMode": "string", "resource.kubernetes.io/pciBusID": "string", "resource.kubernetes.io/pcieRoot": "string",
		"resource.kubernetes.io/numaNode": "int",
	},
	deviceattr.TypeMIG: {
		"type": "string", "parentUUID": "string", "profile": "string", "productName": "string", "brand": "string",
		"architecture": "string", "cudaComputeCapability": "version", "driverVersion": "version", "cudaDriverVersion": "version",
		"addressingMode": "string", "resource.kubernetes.io/pciBusID": "string", "resource.kubernetes.io/pcieRoot": "string",
		"resource.kubernetes.io/numaNode": "int",
	},
}

func attrType(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return "string"
	case a.VersionValue != nil:
		return "version"
	case a.IntValue != nil:
		return "int"
	case a.BoolValue != nil:
		return "bool"
	}
	return "none"
}

func attrValue(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return *a.VersionValue
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	}
	return ""
}

// TestNVIDIAAttributesOnGPUAndMIG (issue 58, item 3): every attribute
// NVIDIA's reference driver publishes is on our GPU and MIG devices,
// dynamic and static, under its name, with its type and with the values it
// would publish: the GPU's (its parent's for a MIG device) product, brand
// "Nvidia", PCI address, the node's driver versions as semver, and the
// addressing mode NVML reports (HMM on x86 hosts, ATS on Grace Hopper).
func TestNVIDIAAttributesOnGPUAndMIG(t *testing.T) {
	for _, tc := range []struct {
		name, profile string
		static        bool
		mode          string
	}{
		{"h100 dynamic MIG", "h100x2", false, nvdev.AddressingModeHMM},
		{"a100 static MIG", "a100-80gbx2" + simulate.MigSuffix, true, nvdev.AddressingModeHMM},
		{"gh200 dynamic MIG", "gh200x1", false, nvdev.AddressingModeATS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, inv := simulatedNodeOn(t, tc.profile, r580, r580Cuda)
			if tc.static {
				inv = staticMig(t, sim, inv)
			}
			byUUID := map[string]*nvdev.GPU{}
			for _, g := range inv.GPUs {
				byUUID[g.UUID] = g
			}
			res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true})
			if err := resourceslices.Validate(res); err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, d := range devicesOf(res) {
				typ := attrValue(d.Attributes[deviceattr.AttrType])
				want, ok := nvidiaAttributes[typ]
				if !ok {
					continue // monitor devices: NVIDIA has none
				}
				seen[typ]++
				g := byUUID[attrValue(d.Attributes[deviceattr.AttrUUID])]
				if typ == deviceattr.TypeMIG {
					g = byUUID[attrValue(d.Attributes[deviceattr.AttrParentUUID])]
				}
				if g == nil {
					t.Fatalf("%s: no GPU of its own or parent", d.Name)
				}
				for name, wantType := range want {
					a, ok := d.Attributes[resourceapi.QualifiedName(name)]
					if !ok {
						t.Errorf("%s: no %s", d.Name, name)
					} else if got := attrType(a); got != wantType {
						t.Errorf("%s: %s is a %s, NVIDIA publishes a %s", d.Name, name, got, wantType)
					}
				}
				if tc.static && typ == deviceattr.TypeMIG {
					if _, ok := d.Attributes[deviceattr.AttrUUID]; !ok {
						t.Errorf("%s: a static MIG device without uuid", d.Name)
					}
				}
				for name, wantValue := range map[string]string{
					"productName": g.ProductName, "brand": "Nvidia", "architecture": g.Architecture,
					"cudaComputeCapability": g.CudaComputeCapability, "driverVersion": r580, "cudaDriverVersion": "13.0.0",
					"addressingMode": tc.mode, "resource.kubernetes.io/pciBusID": g.PCIBusID,
				} {
					if got := attrValue(d.Attributes[resourceapi.QualifiedName(name)]); got != wantValue {
						t.Errorf("%s: %s %q, want %q", d.Name, name, got, wantValue)
					}
				}
			}
			if seen[deviceattr.TypeMIG] == 0 || (!tc.static && seen[deviceattr.TypeGPU] == 0) {
				t.Errorf("published %v: want MIG devices, and GPUs where MIG is dynamic", seen)
			}
		})
	}
}

// TestNoAddressingModeBeforeR580: a driver whose NVML lacks
// nvmlDeviceGetAddressingMode (the simulator's default 570) publishes no
// addressingMode, as NVIDIA's driver does there (go-nvlib's
// GetAddressingModeAsString answers "" without the symbol), and a GPU
// passed through to a VM never carries this host's.
func TestNoAddressingModeBeforeR580(t *testing.T) {
	for _, tc := range []struct {
		driver string
		cuda   int
	}{{simulate.DriverVersion, simulate.CudaDriverVersion}, {r580, r580Cuda}} {
		_, inv := simulatedNodeOn(t, "h100x2", tc.driver, tc.cuda)
		res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true, Passthrough: resourceslices.PassthroughSelector{All: true}})
		for _, d := range devicesOf(res) {
			_, has := d.Attributes[deviceattr.AttrAddressingMode]
			want := tc.driver == r580 && attrValue(d.Attributes[deviceattr.AttrType]) != deviceattr.TypeVFIO
			if has != want {
				t.Errorf("driver %s, %s: addressingMode published %v, want %v", tc.driver, d.Name, has, want)
			}
		}
	}
}

// TestNVIDIASelectorsMatch (issue 58, item 3): selectors written against
// NVIDIA's slices allocate here, through the scheduler's allocator: a MIG
// device on a GPU with driver >= 550 (matched nothing while MIG devices
// left the driver version to their parent GPU), one by brand, CUDA driver
// and PCI address, and a GPU by addressing mode.
func TestNVIDIASelectorsMatch(t *testing.T) {
	_, inv := simulatedNodeOn(t, "h100x2", r580, r580Cuda)
	node := func(t *testing.T) *schedtest.Cluster {
		return schedtest.New(t, driverName, "n1", resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true}))
	}
	attr := func(name string) string { return fmt.Sprintf("device.attributes['%s'].%s", driverName, name) }
	busID := inv.GPUs[1].PCIBusID
	for _, tc := range []struct {
		name, class string
		selectors   []string
		wantPrefix  string
	}{
		{"MIG by driver version", "mig.nvidia.com", []string{attr("driverVersion") + ".compareTo(semver('550.0.0')) >= 0"}, "gpu-0-mig-"},
		{"MIG by brand, CUDA driver and PCI address", "mig.nvidia.com", []string{
			attr("brand") + " == 'Nvidia'", attr("cudaDriverVersion") + ".isGreaterThan(semver('12.0.0'))",
			fmt.Sprintf("device.attributes['resource.kubernetes.io'].pciBusID == '%s'", busID),
		}, "gpu-1-mig-"},
		{"GPU by addressing mode", "gpu.nvidia.com", []string{attr("addressingMode") + " == 'HMM'"}, "gpu-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := schedtest.Devices(node(t).Allocate(schedtest.Claim(tc.name, schedtest.Request("r", tc.class, 1, tc.selectors...))))
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.wantPrefix) {
				t.Fatalf("allocated %v, want one device %s...", got, tc.wantPrefix)
			}
		})
	}
	// A mode no GPU has matches nothing rather than failing.
	if got := node(t).Allocate(schedtest.Claim("ats", schedtest.Request("r", "gpu.nvidia.com", 1, attr("addressingMode")+" == 'ATS'"))); got != nil {
		t.Errorf("ATS selector allocated %v on x86 GPUs", schedtest.Devices(got))
	}
}
