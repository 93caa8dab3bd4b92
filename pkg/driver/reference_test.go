// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// startReference starts the plugin on the reference driver's node and
// connects a kubelet to it.
func startReference(t *testing.T, r *referenceNode) *Driver {
	t.Helper()
	return startReferenceWith(t, r, nil)
}

// startReferenceWith is startReference with the config changed first.
func startReferenceWith(t *testing.T, r *referenceNode, change func(*Config)) *Driver {
	t.Helper()
	be, err := backend.Open(backend.Options{SimulateProfile: r.profile, NodeName: testNode, StateDir: r.in.StateDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.Background().V(3)), testwait.Timeout)
	cfg := Config{DriverName: testDriver, NodeName: testNode, Client: r.in.Client, Backend: be,
		StateDir: r.in.StateDir(), CDIDir: r.in.CDIDir(), PluginDir: r.in.Dir("plugin"), RegistrarDir: r.in.Dir("registry"),
		Publish: resourceslices.Options{DynamicMIG: true}, ReferencePoll: time.Hour}
	if change != nil {
		change(&cfg)
	}
	d, err := Start(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("Start on the reference driver's node: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+d.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.in.Conn, r.in.Kubelet = conn, drapb.NewDRAPluginClient(conn)
	t.Cleanup(func() { conn.Close(); d.Stop(); cancel() })
	return d
}

// allocated is a claim of this driver allocated one device.
func allocated(name, device string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: testDriver, Pool: testNode, Device: device}}}}
	return c
}

// TestTakesOverReferenceDriverClaims starts the plugin on a node that
// NVIDIA's reference driver served and that was not drained: its
// checkpoint, as its plugin writes it, lists two prepared claims without
// names (a MIG device on GPU 0, GPU 1 whole) and one begun. On main the
// plugin waited for the API server to say those claims were gone, which
// it never can for claims without a name, and did not register, so the
// kubelet could not unprepare them either: Start never returned. Now it
// starts at once, holds them, and the kubelet's unprepare releases what
// the reference driver made; then the checkpoint is renamed.
func TestTakesOverReferenceDriverClaims(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := startReference(t, r)
	ctx := context.Background()
	a, b, c := r.claims["ref-a"], r.claims["ref-b"], r.claims["ref-c"]

	// The begun prepare is released at once (the kubelet was never told
	// it is prepared); the two prepared claims are held, named by UID.
	err := d.ref.Load().NotReady()
	for _, want := range []string{"2 claim(s)", "uid " + a.UID, "uid " + b.UID, "1 MIG device(s) and 2 CDI spec(s)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("readiness %v does not say %q", err, want)
		}
	}
	if evs := nodeEvents(t, r, ReasonReferenceDriverClaims); len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || !strings.Contains(evs[0].Message, "uid "+a.UID) {
		t.Errorf("%s events: %+v, want one Warning naming the claims", ReasonReferenceDriverClaims, evs)
	}
	if m := r.missing(); len(m) > 0 {
		t.Errorf("the reference driver's files of claims in use were deleted: %v", m)
	}
	if n := d.cfg.Backend.Simulator.MigInstanceCount(r.migGPU); n != 1 {
		t.Errorf("%d MIG devices on GPU 0, want ref-a's", n)
	}
	if _, ok := d.state.Ledger.Foreign(types.UID(c.UID)); ok {
		t.Errorf("the begun claim %s is still held", c)
	}

	// Their devices are prepared for no other claim: GPU 1, GPU 0 whole
	// and the MIG slice ref-a's device has. A free slice of GPU 0 is.
	for _, dev := range []string{"gpu-1", "gpu-0", "gpu-0-mig-1g10gb-19-0"} {
		other := allocated("other-"+dev, dev)
		if _, err := r.in.Prepare(ctx, other); err == nil || !strings.Contains(err.Error(), "already prepared for claim") && !strings.Contains(err.Error(), "shares GPU hardware") {
			t.Errorf("prepare %s for another claim: %v, want it refused as held", dev, err)
		}
	}
	free := allocated("free-slice", "gpu-0-mig-1g10gb-19-1")
	if _, err := r.in.Prepare(ctx, free); err != nil {
		t.Errorf("prepare a free slice of GPU 0: %v", err)
	} else if err := r.in.Unprepare(ctx, free); err != nil {
		t.Fatal(err)
	}

	// A restarted kubelet asks again for a held claim: the reference
	// driver's devices are the answer.
	res, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{r.claimObj(t, "ref-b")})
	if got := res[types.UID(b.UID)]; got.Err != nil || len(got.Devices) != 1 || got.Devices[0].DeviceName != "gpu-1" || got.Devices[0].CDIDeviceIDs[0] != "k8s.gpu.nvidia.com/claim="+b.UID+"-gpu-1" {
		t.Errorf("prepare of a held claim: %+v", got)
	}

	// The kubelet unprepares ref-b (its pod ended): its spec goes, GPU 1
	// is free for another claim; ref-a is still held.
	if err := r.in.Unprepare(ctx, r.claimObj(t, "ref-b")); err != nil {
		t.Fatalf("unprepare of a held claim: %v", err)
	}
	if _, err := os.Stat(r.specPath(b)); !os.IsNotExist(err) {
		t.Errorf("ref-b's CDI spec is still there: %v", err)
	}
	if err := d.ref.Load().NotReady(); err == nil || !strings.Contains(err.Error(), "1 claim(s)") {
		t.Errorf("readiness after one unprepare: %v", err)
	}
	after := allocated("after-b", "gpu-1")
	if _, err := r.in.Prepare(ctx, after); err != nil {
		t.Errorf("prepare GPU 1 once ref-b is released: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.in.Dir("plugin"), refdriver.CheckpointFile)); err != nil {
		t.Errorf("the checkpoint is gone while ref-a is held: %v", err)
	}

	// ref-a: its MIG device is destroyed, its spec removed, the
	// checkpoint renamed, the event posted, the plugin ready.
	if err := r.in.Unprepare(ctx, r.claimObj(t, "ref-a")); err != nil {
		t.Fatalf("unprepare of ref-a: %v", err)
	}
	if n := d.cfg.Backend.Simulator.MigInstanceCount(r.migGPU); n != 0 {
		t.Errorf("%d MIG devices on GPU 0 after ref-a's unprepare, want 0", n)
	}
	if _, err := os.Stat(r.specPath(a)); !os.IsNotExist(err) {
		t.Errorf("ref-a's CDI spec is still there: %v", err)
	}
	pluginDir := r.in.Dir("plugin")
	if _, err := os.Stat(filepath.Join(pluginDir, refdriver.CheckpointFile+refdriver.MigratedSuffix)); err != nil {
		t.Errorf("the checkpoint was not renamed: %v", err)
	}
	if err := d.ref.Load().NotReady(); err != nil {
		t.Errorf("readiness once none is held: %v", err)
	}
	if evs := nodeEvents(t, r, ReasonReferenceDriverClaimsGone); len(evs) != 1 || evs[0].Type != v1.EventTypeNormal {
		t.Errorf("%s events: %+v, want one Normal", ReasonReferenceDriverClaimsGone, evs)
	}
	whole := allocated("after-a", "gpu-0")
	if _, err := r.in.Prepare(ctx, whole); err != nil {
		t.Errorf("prepare GPU 0 whole once ref-a is released: %v", err)
	}
}

// TestReferenceBootIDIsTheKernels: NVIDIA's plugin records the kernel's
// boot ID. On main a simulated node compared it with the simulator's own
// boot ID, took a checkpoint of this boot for one of an earlier boot and
// renamed it at once, holding nothing. A checkpoint of another boot is
// renamed at once, holding nothing.
func TestReferenceBootIDIsTheKernels(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := startReference(t, r)
	path := filepath.Join(r.in.Dir("plugin"), refdriver.CheckpointFile)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a checkpoint of this boot was renamed: %v", err)
	}
	if len(d.state.Ledger.ForeignClaims()) != 2 {
		t.Errorf("held %d claims, want 2", len(d.state.Ledger.ForeignClaims()))
	}
	d.Stop()

	r2 := newReferenceNode(t, "h100x2")
	r2.editV2(t, func(v2 map[string]any) { v2["nodeBootID"] = "0f0e0d0c-0000-4000-8000-000000000000" })
	d2 := startReference(t, r2)
	if _, err := os.Stat(filepath.Join(r2.in.Dir("plugin"), refdriver.CheckpointFile+refdriver.MigratedSuffix)); err != nil {
		t.Errorf("a checkpoint of an earlier boot was not renamed: %v", err)
	}
	if n := len(d2.state.Ledger.ForeignClaims()); n != 0 || d2.ref.Load().NotReady() != nil {
		t.Errorf("an earlier boot's claims held: %d, %v", n, d2.ref.Load().NotReady())
	}
}

// TestReferenceReleasedSurvivesRestart: a claim released before a restart
// is not held again, and a claim the API server says is gone is released
// at start.
func TestReferenceReleasedSurvivesRestart(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := startReference(t, r)
	if err := r.in.Unprepare(context.Background(), r.claimObj(t, "ref-b")); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	if err := r.in.Client.ResourceV1().ResourceClaims("default").Delete(context.Background(), "ref-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// ref-a carries no name in the checkpoint: only the kubelet can
	// release it. Name it, as the v2 PrepareStarted entry would.
	r.editCheckpoint(t, func(claims map[string]any) {
		e := claims[r.claims["ref-a"].UID].(map[string]any)
		e["name"], e["namespace"] = "ref-a", "default"
	})
	d2 := startReference(t, r)
	if n := len(d2.state.Ledger.ForeignClaims()); n != 0 {
		t.Errorf("held %d claims after a restart, want 0 (ref-b released, ref-a deleted)", n)
	}
	if _, err := os.Stat(filepath.Join(r.in.Dir("plugin"), refdriver.CheckpointFile+refdriver.MigratedSuffix)); err != nil {
		t.Errorf("not renamed: %v", err)
	}
}

// TestNoReferenceClaimsNoWait: a checkpoint of the reference driver that
// lists no claim (it was drained, or it never prepared one) holds nothing
// up; it is renamed.
func TestNoReferenceClaimsNoWait(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	path := filepath.Join(r.in.Dir("plugin"), refdriver.CheckpointFile)
	if err := os.WriteFile(path, []byte(`{"checksum":1,"v1":{},"v2":{"checksum":2,"nodeBootID":"x"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	startReference(t, r)
	if _, err := os.Stat(path + refdriver.MigratedSuffix); err != nil {
		t.Errorf("not renamed: %v", err)
	}
	if evs := nodeEvents(t, r, ReasonReferenceDriverClaims); len(evs) != 0 {
		t.Errorf("events %+v, want none", evs)
	}
}

func nodeEvents(t *testing.T, r *referenceNode, reason string) []v1.Event {
	t.Helper()
	list, err := r.in.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []v1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == testNode {
			out = append(out, e)
		}
	}
	return out
}

func (r *referenceNode) claimObj(t *testing.T, name string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := r.in.Client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// editV2 changes the checkpoint's v2 object as the reference driver
// would rewrite it.
func (r *referenceNode) editV2(t *testing.T, edit func(v2 map[string]any)) {
	t.Helper()
	path := filepath.Join(r.in.Dir("plugin"), refdriver.CheckpointFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cp map[string]any
	if err := json.Unmarshal(data, &cp); err != nil {
		t.Fatal(err)
	}
	edit(cp["v2"].(map[string]any))
	if data, err = json.Marshal(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil { // as its checkpoint manager writes
		t.Fatal(err)
	}
}

func (r *referenceNode) editCheckpoint(t *testing.T, edit func(claims map[string]any)) {
	t.Helper()
	r.editV2(t, func(v2 map[string]any) { edit(v2["preparedClaims"].(map[string]any)) })
}
