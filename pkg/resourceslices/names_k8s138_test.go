// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// names138 checks a published device's attribute and capacity names by the
// rules of Kubernetes 1.38's ResourceSlice helper (issue 49): an
// unqualified name already lives in the driver's domain, so a name that
// spells that domain out ("gpu.nvidia.com/uuid") is refused, and a
// qualified name is one domain and one identifier, so a name with more than
// one "/" is refused too. The 1.38 modules are not on the module proxy yet,
// so the rules are written from the issue, not from the helper's code.
func names138(driver string, d resourceapi.Device) []string {
	var bad []string
	check := func(what, name string) {
		switch {
		case strings.HasPrefix(name, driver+"/"):
			bad = append(bad, fmt.Sprintf("device %s: %s %q carries the driver's own domain %s/ (publish it unqualified)", d.Name, what, name, driver))
		case strings.Count(name, "/") > 1:
			bad = append(bad, fmt.Sprintf("device %s: %s %q has more than one \"/\"", d.Name, what, name))
		}
	}
	for name := range d.Attributes {
		check("attribute", string(name))
	}
	for name := range d.Capacity {
		check("capacity", string(name))
	}
	return bad
}

func TestNames138RejectsWhatTheHelperRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		attr, capacity string
		want           string
	}{
		"own domain attribute":  {attr: driverName + "/uuid", want: "driver's own domain"},
		"own domain capacity":   {capacity: driverName + "/memory", want: "driver's own domain"},
		"two slashes":           {attr: "resource.kubernetes.io/pci/root", want: "more than one"},
		"other domain is fine":  {attr: "resource.kubernetes.io/pcieRoot"},
		"unqualified is fine":   {attr: "uuid", capacity: "memory"},
		"domain suffix is fine": {attr: "sub." + driverName + "x/uuid"},
	} {
		t.Run(name, func(t *testing.T) {
			d := resourceapi.Device{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}, Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
			if tc.attr != "" {
				d.Attributes[resourceapi.QualifiedName(tc.attr)] = resourceapi.DeviceAttribute{StringValue: ptr.To("x")}
			}
			if tc.capacity != "" {
				d.Capacity[resourceapi.QualifiedName(tc.capacity)] = resourceapi.DeviceCapacity{}
			}
			bad := names138(driverName, d)
			switch {
			case tc.want == "" && len(bad) > 0:
				t.Fatalf("refused: %v", bad)
			case tc.want != "" && (len(bad) != 1 || !strings.Contains(bad[0], tc.want)):
				t.Fatalf("got %v, want one error containing %q", bad, tc.want)
			}
		})
	}
}

// staticMigInventory partitions a node of count GPUs as an admin does
// (nvidia-smi mig -cgi <profile> -C: NVML picks the placement, one compute
// instance spans the GPU instance): GPU i gets one MIG device of the
// model's profile i, so every profile is published as static MIG once.
func staticMigInventory(t *testing.T, model string, count int) *nvdev.Inventory {
	t.Helper()
	sim, inv, err := simulate.Discover(fmt.Sprintf("%sx%d%s", model, count, simulate.MigSuffix), "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	return staticMig(t, sim, inv)
}

// staticMig creates staticMigInventory's MIG devices on a simulated node
// in MIG mode and discovers it again.
func staticMig(t *testing.T, sim *simulate.Simulator, inv *nvdev.Inventory) *nvdev.Inventory {
	t.Helper()
	for i, g := range inv.GPUs {
		p := g.MigProfiles[i%len(g.MigProfiles)]
		info := p.Info
		gi, ret := g.Device.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			t.Fatalf("GPU %d: create %s GPU instance: %s", g.Minor, p.Name, nvml.ErrorString(ret))
		}
		ci, ret := gi.GetComputeInstanceProfileInfo(p.CIProfileID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS {
			t.Fatalf("GPU %d: %s compute instance profile: %s", g.Minor, p.Name, nvml.ErrorString(ret))
		}
		if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
			t.Fatalf("GPU %d: create %s compute instance: %s", g.Minor, p.Name, nvml.ErrorString(ret))
		}
	}
	inv, err := nvdev.Discover(sim, nvdev.Options{SysfsRoot: sim.SysfsRoot()})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestPublishedNamesPassK8s138Helper publishes every simulated model in
// every mode (whole GPUs with their monitor devices, dynamic MIG with and
// without the admin's MIG mode, static MIG of every profile, passthrough
// beside whole GPUs and beside dynamic MIG, memory fractions) and holds
// every attribute and capacity name against the 1.38 helper's rules
// (names138). Each mode must publish the device types it exists for, so a
// mode that silently published nothing cannot pass.
func TestPublishedNamesPassK8s138Helper(t *testing.T) {
	all := resourceslices.PassthroughSelector{All: true}
	for _, model := range simulate.ModelNames() {
		probe := simulatedInventory(t, model+"x1").GPUs[0]
		migCapable := len(probe.MigProfiles) > 0
		// Ampere changes MIG mode only with a reset: without the admin's
		// MIG mode its GPUs are published whole, not partitionable.
		dynamicWithoutAdmin := migCapable && !probe.MigModeChangeNeedsReset
		for _, tc := range []struct {
			mode      string
			inv       func(t *testing.T) *nvdev.Inventory
			o         resourceslices.Options
			wantTypes []string
			// wantMig: the mode publishes MIG devices only on a
			// MIG-capable model.
			wantMig bool
		}{
			{mode: "whole", o: resourceslices.Options{}, wantTypes: []string{deviceattr.TypeGPU, deviceattr.TypeMonitor}},
			{mode: "dynamic-mig", o: resourceslices.Options{DynamicMIG: true}, wantTypes: []string{deviceattr.TypeMonitor}, wantMig: true},
			{mode: "dynamic-mig-mode-on", inv: func(t *testing.T) *nvdev.Inventory { return simulatedInventory(t, model+"x2"+simulate.MigSuffix) },
				o: resourceslices.Options{DynamicMIG: true}, wantTypes: []string{deviceattr.TypeMonitor}, wantMig: true},
			{mode: "static-mig", inv: func(t *testing.T) *nvdev.Inventory {
				n := len(simulatedInventory(t, model+"x1").GPUs[0].MigProfiles)
				return staticMigInventory(t, model, n)
			}, o: resourceslices.Options{}, wantTypes: []string{deviceattr.TypeMonitor}, wantMig: true},
			{mode: "passthrough", o: resourceslices.Options{Passthrough: all}, wantTypes: []string{deviceattr.TypeGPU, deviceattr.TypeVFIO, deviceattr.TypeMonitor}},
			{mode: "passthrough-dynamic-mig", o: resourceslices.Options{Passthrough: all, DynamicMIG: true}, wantTypes: []string{deviceattr.TypeVFIO, deviceattr.TypeMonitor}, wantMig: true},
			{mode: "memory-fractions", o: resourceslices.Options{FractionalMemory: true}, wantTypes: []string{deviceattr.TypeGPU, deviceattr.TypeMonitor}},
		} {
			if tc.mode == "static-mig" && !migCapable {
				continue
			}
			t.Run(model+"/"+tc.mode, func(t *testing.T) {
				var inv *nvdev.Inventory
				if tc.inv != nil {
					inv = tc.inv(t)
				} else {
					inv = simulatedInventory(t, model+"x2")
				}
				res := resourceslices.Build("n1", inv, tc.o)
				if err := resourceslices.Validate(res); err != nil {
					t.Fatal(err)
				}
				types := map[string]int{}
				shareable := 0
				for _, s := range resourceslices.Objects(driverName, "n1", res) {
					for _, d := range s.Spec.Devices {
						for _, e := range names138(s.Spec.Driver, d) {
							t.Error(e)
						}
						if a, ok := d.Attributes[deviceattr.AttrType]; ok && a.StringValue != nil {
							types[*a.StringValue]++
						}
						if ptr.Deref(d.AllowMultipleAllocations, false) {
							shareable++
						}
					}
				}
				want := tc.wantTypes
				if tc.wantMig && migCapable && (dynamicWithoutAdmin || tc.inv != nil) {
					want = append(want, deviceattr.TypeMIG)
				}
				for _, typ := range want {
					if types[typ] == 0 {
						t.Errorf("no device of type %s published (published %v)", typ, types)
					}
				}
				if tc.mode == "memory-fractions" && shareable == 0 {
					t.Error("no device offered for memory fractions (allowMultipleAllocations)")
				}
			})
		}
	}
}
