// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// Consumable shares end to end on one node: NVIDIA's users' claims
// (internal/schedtest nvidiaclaims.go), allocated by the real allocator
// over the slices the plugin published, prepared over the kubelet's
// socket, get the sharing their mode promises (docs/sharing.md,
// "Consumable shares").

func newSharesNode(t *testing.T, profile string, mode resourceslices.ShareMode) (*node, *schedtest.Cluster) {
	t.Helper()
	n := newNodeWith(t, profile, false)
	n.shares = resourceslices.ConsumableShares{Mode: mode, Count: resourceslices.DefaultShareCount}
	n.restart(profile)
	// The slices of the first start (no shares) stay until the restarted
	// plugin's controller replaces them.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var objs []*resourceapi.ResourceSlice
		shared := false
		for _, s := range n.publishedSlices() {
			objs = append(objs, &s)
			for _, d := range s.Spec.Devices {
				shared = shared || (d.Name == "gpu-0" && d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations)
			}
		}
		if shared {
			return n, schedtest.NewFromSlices(t, testNode, objs)
		}
		if time.Now().After(deadline) {
			t.Fatal("gpu-0 not published for shares")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// allocated allocates a claim of NVIDIA's spec (with opaque configs of
// this driver, as a claim's spec.devices.config carries them) and stores
// it in the API as the scheduler would; nil when it does not fit.
func (n *node) allocated(c *schedtest.Cluster, name, spec string, configs ...string) *resourceapi.ResourceClaim {
	n.t.Helper()
	claim := schedtest.ClaimFromSpec(n.t, name, spec)
	for _, cfg := range configs {
		claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: testDriver, Parameters: runtime.RawExtension{Raw: []byte(cfg)}}},
		})
	}
	r := c.Allocate(claim)
	if r == nil {
		return nil
	}
	claim.Status.Allocation = r
	created, err := n.client.ResourceV1().ResourceClaims("default").Create(context.Background(), claim, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return created
}

func (n *node) mustAllocate(c *schedtest.Cluster, name, spec string, configs ...string) *resourceapi.ResourceClaim {
	n.t.Helper()
	claim := n.allocated(c, name, spec, configs...)
	if claim == nil {
		n.t.Fatalf("claim %s did not fit", name)
	}
	if r := claim.Status.Allocation.Devices.Results[0]; r.Device != "gpu-0" || r.ShareID == nil {
		n.t.Fatalf("claim %s: %s share %v, want a share of gpu-0", name, r.Device, r.ShareID)
	}
	return claim
}

func hasMPS(env []string) bool {
	return slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "CUDA_MPS_") })
}

const (
	tsLong = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`
	mpsCfg = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`
	tsCfg  = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`
)

// Mode memory: each share runs under MPS, limited to the memory it asked
// for, one daemon for the GPU's shares.
func TestNVIDIAMemorySharesRunUnderMPS(t *testing.T) {
	n, c := newSharesNode(t, "h100x1", resourceslices.SharesMemory)
	gpu := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	a := n.mustAllocate(c, "mem-4gi", schedtest.NVIDIAMemoryShare)
	b := n.mustAllocate(c, "mem-2gi", schedtest.NVIDIAE2EMemoryShare)
	idsA, idsB := n.mustPrepare(a), n.mustPrepare(b)
	if env := envOf(t, n, idsA); !slices.Contains(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M") {
		t.Errorf("4Gi share env: %v", env)
	}
	if env := envOf(t, n, idsB); !slices.Contains(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M") {
		t.Errorf("2Gi share env: %v", env)
	}
	m, d := n.mps(gpu)
	if _, ok := m.PID(d); !ok {
		t.Fatal("no MPS daemon for the shared GPU")
	}
	// Time-slicing cannot enforce a memory share: refused, naming the field.
	ts := n.mustAllocate(c, "mem-ts", schedtest.NVIDIAMemoryShare, tsCfg)
	if e := n.prepare(ts)["uid-mem-ts"].GetError(); !strings.Contains(e, "sharing.strategy: TimeSlicing cannot enforce a memory share") {
		t.Errorf("time-slicing on a memory share: %q", e)
	}
	n.unprepare(a, b)
	if _, ok := m.PID(d); ok {
		t.Fatal("daemon still runs after the last share")
	}
}

// Mode integer: at most 4 claims (NVIDIA's demo count) get a share of the
// GPU, each time-sliced at the default interval, none under MPS.
func TestNVIDIAIntegerSharesAreTimeSliced(t *testing.T) {
	n, c := newSharesNode(t, "h100x1", resourceslices.SharesInteger)
	var claims []*resourceapi.ResourceClaim
	for i, spec := range []string{schedtest.NVIDIAUnsizedShare, schedtest.NVIDIAIntegerShare, schedtest.NVIDIAUnsizedShare, schedtest.NVIDIAIntegerShare} {
		claims = append(claims, n.mustAllocate(c, "share-"+string(rune('a'+i)), spec))
	}
	if extra := n.allocated(c, "fifth", schedtest.NVIDIAUnsizedShare); extra != nil {
		t.Fatal("a fifth claim got one of 4 shares")
	}
	for _, claim := range claims {
		if env := envOf(t, n, n.mustPrepare(claim)); hasMPS(env) {
			t.Errorf("%s runs under MPS: %v", claim.Name, env)
		}
		rec, _ := n.driver.state.Ledger.Get(claim.UID)
		if sh := rec.Devices[0].Sharing; sh == nil || sh.Strategy != configapi.TimeSlicingStrategy || sh.Interval != configapi.DefaultTimeSlice {
			t.Errorf("%s sharing %+v, want TimeSlicing Default", claim.Name, sh)
		}
	}
	n.unprepare(claims...)
	if recs := n.driver.state.Ledger.Claims(); len(recs) != 0 {
		t.Fatalf("records left: %+v", recs)
	}
}

// Mode unlimited: claims without a request share the GPU, time-sliced at
// the one interval they agree on; another interval, and MPS, are refused
// with errors that name the field and the fix.
func TestNVIDIAUnlimitedSharesAgreeOnTheTimeSlice(t *testing.T) {
	n, c := newSharesNode(t, "h100x1", resourceslices.SharesUnlimited)
	sim := n.driver.cfg.Backend.Simulator
	gpu := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	long := n.mustAllocate(c, "long", schedtest.NVIDIAE2EUnlimitedShare, tsLong)
	n.mustPrepare(long)
	if got := sim.TimeSlice(gpu); got != "Long" {
		t.Fatalf("time slice %q, want Long", got)
	}
	plain := n.mustAllocate(c, "plain", schedtest.NVIDIAUnsizedShare)
	if e := n.prepare(plain)["uid-plain"].GetError(); !strings.Contains(e, "conflicts with interval Long") {
		t.Errorf("a Default share beside a Long one: %q", e)
	}
	mps := n.mustAllocate(c, "mps", schedtest.NVIDIAUnsizedShare, mpsCfg)
	if e := n.prepare(mps)["uid-mps"].GetError(); !strings.Contains(e, "sharing.strategy: MPS cannot run on a share") || !strings.Contains(e, "sharing.consumableShares.mode") {
		t.Errorf("MPS on an unlimited share: %q", e)
	}
	long2 := n.mustAllocate(c, "long-2", schedtest.NVIDIAE2EMemoryShare, tsLong)
	if env := envOf(t, n, n.mustPrepare(long2)); hasMPS(env) {
		t.Errorf("a booked memory request runs under MPS: %v", env)
	}
	n.unprepare(long)
	if got := sim.TimeSlice(gpu); got != "Long" {
		t.Fatalf("time slice %q while long-2 holds it, want Long", got)
	}
	n.unprepare(long2)
	if got := sim.TimeSlice(gpu); got != "Default" {
		t.Fatalf("time slice %q after the last share, want Default", got)
	}
	// With the GPU free of Long, the unconfigured share prepares.
	if env := envOf(t, n, n.mustPrepare(plain)); hasMPS(env) {
		t.Errorf("unlimited share env: %v", env)
	}
}
