// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const driver = "gpu.nvidia.com"

// node publishes a simulated node's slices exactly as the plugin does.
func node(t testing.TB, s *clusterview.Snapshot, name, profile string, o resourceslices.Options) []*resourceapi.ResourceSlice {
	t.Helper()
	_, inv, err := simulate.Discover(profile, name, filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	first := len(s.Slices)
	for i, sl := range resourceslices.Objects(driver, name, resourceslices.Build(name, inv, o)) {
		sl.Name = fmt.Sprintf("%s%d", sl.GenerateName, i)
		s.Slices = append(s.Slices, sl)
	}
	var out []*resourceapi.ResourceSlice
	for i := first; i < len(s.Slices); i++ {
		out = append(out, &s.Slices[i])
	}
	return out
}

func snapshot(t testing.TB) *clusterview.Snapshot {
	t.Helper()
	s := &clusterview.Snapshot{DriverName: driver}
	for _, dc := range schedtest.ShippedDeviceClasses(t) {
		s.DeviceClasses = append(s.DeviceClasses, *dc)
	}
	return s
}

// hold allocates a claim with the scheduler's allocator and reserves it
// for pods, as the scheduler does when it binds them.
func hold(t *testing.T, s *clusterview.Snapshot, c *schedtest.Cluster, claim *resourceapi.ResourceClaim, namespace string, pods ...string) {
	t.Helper()
	claim.Namespace = namespace
	r := c.Allocate(claim)
	if r == nil {
		t.Fatalf("claim %s does not fit", claim.Name)
	}
	claim.Status.Allocation = r
	for _, p := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p})
	}
	s.Claims = append(s.Claims, *claim)
}

func timeSliced(claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
		Driver:     driver,
		Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`)},
	}}}}
	return claim
}

// demoFleet is the demo's five cases on one simulated node of four H100s
// (dynamic MIG, GPU 3 shared by memory fractions) and an idle second node.
func demoFleet(t *testing.T) *clusterview.Snapshot {
	s := snapshot(t)
	c := schedtest.NewFromSlices(t, "n1", node(t, s, "n1", "h100x4", resourceslices.Options{DynamicMIG: true, FractionalMemory: true, FractionalGPUs: []int{3}}))
	node(t, s, "n2", "a100-80gbx2", resourceslices.Options{})
	share := func(name, mem string) *resourceapi.ResourceClaim {
		return schedtest.Claim(name, schedtest.WithCapacity(schedtest.Request("gpu", "gpu.nvidia.com", 1, "device.allowMultipleAllocations"),
			map[resourceapi.QualifiedName]string{"memory": mem, "computePercentage": "50"}))
	}
	hold(t, s, c, share("frac-a", "20Gi"), "team-a", "frac-a")
	hold(t, s, c, share("frac-b", "10Gi"), "team-b", "frac-b")
	hold(t, s, c, schedtest.Claim("whole", schedtest.Request("gpu", "gpu.nvidia.com", 1)), "team-a", "trainer")
	hold(t, s, c, timeSliced(schedtest.Claim("shared", schedtest.Request("gpu", "gpu.nvidia.com", 1))), "team-b", "shared-1", "shared-2")
	mig := schedtest.Claim("mig", schedtest.Request("big", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'"),
		schedtest.Request("small", "mig.nvidia.com", 1, "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))
	attr := resourceapi.FullyQualifiedName(driver + "/parentUUID")
	mig.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &attr}}
	hold(t, s, c, mig, "team-a")
	// An unhealthy GPU on the idle node, as the health monitor taints it.
	for i := range s.Slices {
		for j := range s.Slices[i].Spec.Devices {
			if d := &s.Slices[i].Spec.Devices[j]; *s.Slices[i].Spec.NodeName == "n2" && d.Name == "gpu-1" {
				d.Taints = []resourceapi.DeviceTaint{{Key: resourceslices.TaintUnhealthy, Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			}
		}
	}
	return s
}

func byUse(gpus []GPU) map[Use][]GPU {
	m := map[Use][]GPU{}
	for _, g := range gpus {
		m[g.Use] = append(m[g.Use], g)
	}
	return m
}

// TestUsage reads back, from published slices and allocations the
// scheduler's allocator made, every way a GPU can be used.
func TestUsage(t *testing.T) {
	s := demoFleet(t)
	gpus := Usage(s, Filter{})
	if len(gpus) != 6 {
		t.Fatalf("%d GPUs, want 6 (4 on n1, 2 on n2): %+v", len(gpus), gpus)
	}
	u := byUse(gpus)
	if len(u[Whole]) != 1 || len(u[MIG]) != 1 || len(u[Shared]) != 1 || len(u[Fraction]) != 1 || len(u[Free]) != 2 {
		t.Fatalf("uses %v, want one whole, one MIG, one shared, one fraction, two free", u)
	}
	if w := u[Whole][0]; w.Node != "n1" || w.Holders[0].Owner() != "team-a/trainer" || w.Model == "" || w.MemoryBytes == 0 || w.UUID == "" {
		t.Errorf("whole GPU %+v", w)
	}
	m := u[MIG][0]
	if len(m.Holders) != 2 || m.MigSlices != 8 || m.Holders[0].Profile == m.Holders[1].Profile {
		t.Fatalf("MIG GPU %+v, want a 3g.40gb and a 1g.10gb on 8 memory slices", m)
	}
	cell := migCell(&m)
	if !strings.Contains(cell, "3g.40gb team-a/mig (claim, no pod)") || !strings.Contains(cell, "1g.10gb") || !strings.Contains(cell, "; 3/8 slices free") ||
		strings.Count(cell[:strings.Index(cell, "]")], ".") != 3 {
		t.Errorf("MIG drawing %q: want 4+1 slices taken and 3 free", cell)
	}
	if sh := u[Shared][0]; sharedCell(&sh) != "shared time-slicing Long: 1 claim, team-b/shared-1,team-b/shared-2" {
		t.Errorf("shared GPU: %q", sharedCell(&sh))
	}
	f := u[Fraction][0]
	if f.FractionUsedBytes != 30<<30 || len(f.Holders) != 2 || f.Holders[0].Compute != 50 {
		t.Errorf("fraction GPU %+v, want 30Gi used by two shares of 50%%", f)
	}
	if got := fractionCell(&f); !strings.HasPrefix(got, "fraction 30Gi/") || !strings.Contains(got, "team-a/frac-a 20Gi 50%") {
		t.Errorf("fraction cell %q", got)
	}
	var tainted []GPU
	for _, g := range gpus {
		if len(g.Taints) > 0 {
			tainted = append(tainted, g)
		}
	}
	if len(tainted) != 1 || tainted[0].Node != "n2" || tainted[0].Index != 1 || tainted[0].Taints[0] != "gpu.nvidia.com/unhealthy=xid-79:NoSchedule" {
		t.Errorf("tainted GPUs %+v, want n2's GPU 1", tainted)
	}

	if got := Usage(s, Filter{Node: "n2"}); len(got) != 2 || got[0].Node != "n2" {
		t.Errorf("--node n2: %+v", got)
	}
	// team-b holds the shared GPU and one share of the fraction GPU.
	if got := byUse(Usage(s, Filter{Namespace: "team-b"})); len(got[Shared]) != 1 || len(got[Fraction]) != 1 || len(got) != 2 {
		t.Errorf("--namespace team-b: %v", got)
	}
}

func TestReportRendering(t *testing.T) {
	r := NewReport(Usage(demoFleet(t), Filter{}))
	if r.Total.GPUs != 6 || r.Total.Free != 2 || r.Total.Tainted != 1 || r.ByNode["n1"].GPUs != 4 || len(r.ByModel) != 2 {
		t.Errorf("totals %+v by node %+v by model %+v", r.Total, r.ByNode, r.ByModel)
	}
	var out bytes.Buffer
	if err := r.WriteTable(&out, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"NODE  GPU  MODEL", "whole team-a/trainer", "mig [", "shared time-slicing Long", "fraction 30Gi/", "tainted gpu.nvidia.com/unhealthy=xid-79:NoSchedule", "\nMODEL ", "\nNODE "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	out.Reset()
	if err := r.WriteTable(&out, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "team-a/whole=gpu-") || !strings.Contains(out.String(), "GPU-") {
		t.Errorf("wide table lacks claim=device or UUID:\n%s", out.String())
	}
	out.Reset()
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.GPUs) != 6 || back.Total != r.Total {
		t.Errorf("JSON does not round-trip: %v", err)
	}
}

// BenchmarkUsage is `gpudra usage`'s analysis and table over nodes of
// eight dynamic-MIG H100s (216 devices a node), one claim each.
func BenchmarkUsage(b *testing.B) {
	for _, n := range []int{100, 500} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s := snapshot(b)
			for i := range n {
				name := fmt.Sprintf("node-%03d", i)
				c := schedtest.NewFromSlices(b, name, node(b, s, name, "h100x8", resourceslices.Options{DynamicMIG: true}))
				claim := schedtest.Claim("c-"+name, schedtest.Request("mig", "mig.nvidia.com", 1))
				claim.Status.Allocation = c.Allocate(claim)
				s.Claims = append(s.Claims, *claim)
			}
			b.ReportAllocs()
			for b.Loop() {
				r := NewReport(Usage(s, Filter{}))
				if r.Total.GPUs != 8*n || r.Total.MIG != n {
					b.Fatalf("totals %+v", r.Total)
				}
				if err := r.WriteTable(io.Discard, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestUsageWithoutParentUUID: should MIG devices stop publishing
// parentUUID, the device name's minor still finds their GPU.
func TestUsageWithoutParentUUID(t *testing.T) {
	s := demoFleet(t)
	for i := range s.Slices {
		for j := range s.Slices[i].Spec.Devices {
			delete(s.Slices[i].Spec.Devices[j].Attributes, deviceattr.AttrParentUUID)
		}
	}
	gpus := Usage(s, Filter{})
	if u := byUse(gpus); len(gpus) != 6 || len(u[MIG]) != 1 || len(u[MIG][0].Holders) != 2 || u[MIG][0].Model == "" {
		t.Errorf("without parentUUID: %d GPUs, MIG ones %+v", len(gpus), u[MIG])
	}
}

// A GPU a VM's claim holds through its passthrough device is shown as
// passed through, with its index and memory from the GPU's own device.
func TestUsagePassthrough(t *testing.T) {
	s := snapshot(t)
	c := schedtest.NewFromSlices(t, "n1", node(t, s, "n1", "h100x2", resourceslices.Options{Passthrough: resourceslices.PassthroughSelector{All: true}}))
	hold(t, s, c, schedtest.Claim("vm", schedtest.Request("gpu", "vfio.gpu.nvidia.com", 1)), "vms", "virt-launcher-vm")
	u := byUse(Usage(s, Filter{}))
	if len(u[Passthrough]) != 1 || len(u[Free]) != 1 {
		t.Fatalf("uses %v, want one passed-through GPU and one free", u)
	}
	g := u[Passthrough][0]
	if g.Index != 0 || g.MemoryBytes == 0 || g.Holders[0].Owner() != "vms/virt-launcher-vm" {
		t.Errorf("passed-through GPU %+v", g)
	}
	if cell := usageCell(&g); !strings.HasPrefix(cell, "passthrough (vfio-pci) vms/virt-launcher-vm") {
		t.Errorf("cell %q", cell)
	}
	if r := NewReport(Usage(s, Filter{})); r.Total.Passthrough != 1 || r.Total.Free != 1 {
		t.Errorf("totals %+v", r.Total)
	}
}
