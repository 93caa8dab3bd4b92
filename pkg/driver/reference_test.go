// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// TestWaitsForReferenceDriverClaims starts the plugin on a node that
// NVIDIA's reference driver served and that was not drained: its
// checkpoint lists three claims (two prepared, one begun), its CDI specs
// and device metadata are there, its claims hold MIG devices on GPU 0
// and GPU 1 whole. Started without the wait, the plugin published GPU 1
// and those MIG devices as free, and its metadata sweep deleted the
// reference driver's metadata specs and files. With it, the plugin
// touches nothing, publishes nothing, says why (Event, the wait's status
// for /readyz), and starts once the claims are gone: then it serves, and
// the checkpoint is renamed.
func TestWaitsForReferenceDriverClaims(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	be, err := backend.Open(backend.Options{SimulateProfile: r.profile, NodeName: testNode, StateDir: r.in.StateDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().V(3)))
	defer cancel()
	var status atomic.Pointer[string]
	type started struct {
		d   *Driver
		err error
	}
	done := make(chan started, 1)
	go func() {
		d, err := Start(ctx, Config{DriverName: testDriver, NodeName: testNode, Client: r.in.Client, Backend: be,
			StateDir: r.in.StateDir(), CDIDir: r.in.CDIDir(), PluginDir: r.in.Dir("plugin"), RegistrarDir: r.in.Dir("registry"),
			Publish:       resourceslices.Options{DynamicMIG: true},
			ReferencePoll: 10 * time.Millisecond,
			ReferenceWait: func(msg string) { status.Store(&msg) },
		})
		done <- started{d, err}
	}()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(testwait.Timeout); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	statusSays := func(s string) bool { p := status.Load(); return p != nil && strings.Contains(*p, s) }
	waitUntil("the wait to say why", func() bool { return statusSays("3 claim(s)") })
	msg := *status.Load()
	for _, want := range []string{"reference DRA driver", "default/ref-a, default/ref-b, default/ref-c", "1 MIG device(s)", "2 CDI spec(s)", "drain the node", "kubectl drain n1", filepath.Join(r.in.Dir("plugin"), "checkpoint.json")} {
		if !strings.Contains(msg, want) {
			t.Errorf("status %q does not say %q", msg, want)
		}
	}
	stillWaiting := func(when string) {
		t.Helper()
		time.Sleep(50 * time.Millisecond) // several polls
		select {
		case s := <-done:
			t.Fatalf("%s: Start returned (%v) while the reference driver's claims are in use", when, s.err)
		default:
		}
		if n := r.migDevices(); n != 2 {
			t.Errorf("%s: %d MIG devices on GPU 0, want the reference driver's 2", when, n)
		}
		if m := r.missing(); len(m) > 0 {
			t.Errorf("%s: the reference driver's files were deleted: %v", when, m)
		}
		if list, _ := r.in.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); len(list.Items) > 0 {
			t.Errorf("%s: %d ResourceSlices published: the scheduler could hand out devices in use", when, len(list.Items))
		}
	}
	stillWaiting("three claims")
	if evs := nodeEvents(t, r, ReasonReferenceDriverClaims); len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || !strings.Contains(evs[0].Message, "drain the node") {
		t.Errorf("%s events: %+v, want one Warning saying to drain the node", ReasonReferenceDriverClaims, evs)
	}

	// The reference driver unprepares ref-b (its pod ended while it still
	// ran): the entry leaves its checkpoint (device_state.go,
	// deleteClaimFromCheckpoint) and its spec goes.
	b := r.claims["ref-b"]
	r.editCheckpoint(t, func(claims map[string]any) { delete(claims, b.UID) })
	if err := os.Remove(r.specPath(b)); err != nil {
		t.Fatal(err)
	}
	r.files = removeString(r.files, r.specPath(b))
	waitUntil("the wait to count two claims", func() bool { return statusSays("2 claim(s)") })
	stillWaiting("two claims")
	// ref-c is deallocated: its pod is gone, nobody unprepared it.
	c := r.claimObj(t, "ref-c")
	c.Status.Allocation = nil
	if _, err := r.in.Client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil("the wait to count one claim", func() bool { return statusSays("1 claim(s) prepared on this node (default/ref-a;") })
	stillWaiting("one claim")

	// ref-a is deleted (its pod was deleted with the node drained).
	if err := r.in.Client.ResourceV1().ResourceClaims("default").Delete(ctx, "ref-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s := testwait.Receive(t, done, "Start to return once the claims are gone")
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.d.Stop()
	if p := status.Load(); p == nil || *p != "" {
		t.Errorf("the wait's last status %v, want \"\" (done)", p)
	}
	if evs := nodeEvents(t, r, ReasonReferenceDriverClaimsGone); len(evs) != 1 || evs[0].Type != v1.EventTypeNormal {
		t.Errorf("%s events: %+v, want one Normal", ReasonReferenceDriverClaimsGone, evs)
	}
	pluginDir := r.in.Dir("plugin")
	if _, err := os.Stat(filepath.Join(pluginDir, refdriver.CheckpointFile)); !os.IsNotExist(err) {
		t.Errorf("the reference driver's checkpoint is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pluginDir, refdriver.CheckpointFile+refdriver.MigratedSuffix)); err != nil {
		t.Errorf("the reference driver's checkpoint was not renamed: %v", err)
	}
	// Its CDI spec is not this driver's to remove.
	if _, err := os.Stat(r.specPath(r.claims["ref-a"])); err != nil {
		t.Errorf("the reference driver's CDI spec of ref-a was removed: %v", err)
	}

	// It serves: slices published, a claim prepared on the whole GPU the
	// reference driver's ref-b had, and on a MIG device.
	slices, err := r.in.PublishedSlices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, sl := range slices {
		for _, d := range sl.Spec.Devices {
			names[d.Name] = true
		}
	}
	if !names["gpu-1"] {
		t.Fatalf("published %v, want gpu-1", names)
	}
	// The MIG devices of ref-a and ref-c, which the reference driver never
	// unprepared, are left as they are: an admin's static layout, as far
	// as this plugin can tell (docs/install.md says how to clear them).
	gpu0 := 0
	for name := range names {
		if strings.HasPrefix(name, "gpu-0-mig-") {
			gpu0++
		}
	}
	if r.migDevices() != 2 || gpu0 != 2 || !names["gpu-0-mig-1g10gb-0"] || !names["gpu-0-mig-1g10gb-1"] || names["gpu-0"] {
		t.Errorf("GPU 0 after the wait: %d MIG devices, published %v; want the 2 left as static MIG", r.migDevices(), names)
	}
	conn, err := grpc.NewClient("unix://"+s.d.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r.in.Conn, r.in.Kubelet = conn, drapb.NewDRAPluginClient(conn)
	for _, dev := range []string{"gpu-1"} {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-" + dev, UID: types.UID("uid-after-" + dev)}}
		claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: testDriver, Pool: testNode, Device: dev}}}}
		if _, err := r.in.Prepare(ctx, claim); err != nil {
			t.Fatalf("prepare %s after the wait: %v", dev, err)
		}
		if err := r.in.Unprepare(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoReferenceClaimsNoWait: a checkpoint of the reference driver that
// lists no claim (it was drained, or it never prepared one), or only
// claims of an earlier boot, holds nothing up; it is renamed.
func TestNoReferenceClaimsNoWait(t *testing.T) {
	for name, content := range map[string]string{
		"empty":        `{"checksum":1,"v1":{},"v2":{"checksum":2,"nodeBootID":"x"}}`,
		"earlier boot": "",
	} {
		t.Run(name, func(t *testing.T) {
			r := newReferenceNode(t, "h100x2")
			path := filepath.Join(r.in.Dir("plugin"), refdriver.CheckpointFile)
			if content != "" {
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				r.editV2(t, func(v2 map[string]any) { v2["nodeBootID"] = "0f0e0d0c-0000-4000-8000-000000000000" })
			}
			be, err := backend.Open(backend.Options{SimulateProfile: r.profile, NodeName: testNode, StateDir: r.in.StateDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout)
			defer cancel()
			d, err := Start(ctx, Config{DriverName: testDriver, NodeName: testNode, Client: r.in.Client, Backend: be,
				StateDir: r.in.StateDir(), CDIDir: r.in.CDIDir(), PluginDir: r.in.Dir("plugin"), RegistrarDir: r.in.Dir("registry"),
				ReferencePoll: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			d.Stop()
			if _, err := os.Stat(path + refdriver.MigratedSuffix); err != nil {
				t.Errorf("not renamed: %v", err)
			}
			if evs := nodeEvents(t, r, ReasonReferenceDriverClaims); len(evs) != 0 {
				t.Errorf("events %+v, want none", evs)
			}
		})
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

func removeString(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
