// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
)

// statusUUIDs is what the API shows in a claim's status.devices.
func (n *node) statusUUIDs(name string) []string {
	n.t.Helper()
	c, err := n.client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var out []string
	for _, d := range c.Status.Devices {
		var data configapi.DeviceStatusData
		_ = json.Unmarshal(d.Data.Raw, &data)
		out = append(out, data.UUID)
	}
	return out
}

// statusWrites counts the device-status writes the API received.
func (n *node) statusWrites(name string) int {
	writes := 0
	for _, a := range n.client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" && a.GetResource().Resource == "resourceclaims" {
			if p, ok := a.(interface{ GetName() string }); ok && p.GetName() == name {
				writes++
			}
		}
	}
	return writes
}

// TestDeviceStatusWaitsForTheKubeletsCalls: the device status of a
// prepared claim is not written while kubelet calls are in flight (here
// one the test holds open, as another pod's prepare would be), and is
// written once they are over: after the reply, never beside the next call.
func TestDeviceStatusWaitsForTheKubeletsCalls(t *testing.T) {
	n := newNode(t, "h100x2")
	leave := n.driver.status.Gate().Enter()
	c := n.claim("held-back", []string{"gpu-1"})
	n.mustPrepare(c)
	time.Sleep(300 * time.Millisecond) // well past the quiet period, under MaxDefer
	if got := n.statusWrites(c.Name); got != 0 {
		t.Fatalf("%d device-status writes while a kubelet call was in flight", got)
	}
	leave()
	uuid := n.driver.cfg.Backend.Inventory.GPUs[1].UUID
	waitFor(t, "the device status after the calls ended", func() bool {
		got := n.statusUUIDs(c.Name)
		return len(got) == 1 && got[0] == uuid
	})
}

// TestDeviceStatusWrittenAfterARestart: a plugin stopped after answering
// the kubelet but before its deferred status write sent it (the write
// never happened: a call was in flight until the stop) leaves the claim
// without device status; the next start writes it.
func TestDeviceStatusWrittenAfterARestart(t *testing.T) {
	n := newNode(t, "h100x2")
	n.driver.status.Gate().Enter() // never left: the old instance never writes
	c := n.claim("restarted", []string{"gpu-0"})
	n.mustPrepare(c)
	old := n.driver.status
	n.stop()
	testwait.Receive(t, old.Done, "the stopped plugin's status writer to stop")
	if got := n.statusWrites(c.Name); got != 0 {
		t.Fatalf("the stopped plugin wrote the device status %d times; the test needs it unwritten", got)
	}
	if got := n.statusUUIDs(c.Name); len(got) != 0 {
		t.Fatalf("device status %v before the restart", got)
	}
	n.start("h100x2")
	uuid := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	waitFor(t, "the device status written by the restarted plugin", func() bool {
		got := n.statusUUIDs(c.Name)
		return len(got) == 1 && got[0] == uuid
	})
}

// TestKubeletCalls: which gRPC calls hold status writes back.
func TestKubeletCalls(t *testing.T) {
	claims := []*drapb.Claim{{Namespace: "default", Name: "c", Uid: "uid-c"}}
	for _, tc := range []struct {
		method string
		req    any
		want   bool
	}{
		{"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", &drapb.NodePrepareResourcesRequest{Claims: claims}, true},
		{"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources", &drapb.NodePrepareResourcesRequest{}, false}, // liveness probe
		{"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources", &drapbv1beta1.NodePrepareResourcesRequest{Claims: []*drapbv1beta1.Claim{{Uid: "uid-c"}}}, true},
		{"/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources", &drapbv1beta1.NodePrepareResourcesRequest{}, false},
		{"/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources", &drapb.NodeUnprepareResourcesRequest{Claims: claims}, true},
		{"/pluginregistration.Registration/GetInfo", nil, false},
	} {
		if got := kubeletCall(tc.method, tc.req); got != tc.want {
			t.Errorf("kubeletCall(%s, %T) = %v, want %v", tc.method, tc.req, got, tc.want)
		}
	}
}
