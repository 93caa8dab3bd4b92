// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package dcgmview_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	resourceapi "k8s.io/api/resource/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/dcgmview"
)

// kubelet answers List with a fixed response, as the kubelet's
// PodResources server does over its socket.
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	resp *podresourcesv1.ListPodResourcesResponse
}

func (k kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return k.resp, nil
}

func serve(t *testing.T, resp *podresourcesv1.ListPodResourcesResponse) string {
	t.Helper()
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := dcgmview.SocketPath(dir)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(s, kubelet{resp: resp})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return sock
}

func claimResource(driver, device string, share *string, cdi ...string) *podresourcesv1.ClaimResource {
	cr := &podresourcesv1.ClaimResource{DriverName: driver, PoolName: "node-a", DeviceName: device, ShareId: share}
	for _, c := range cdi {
		cr.CdiDevices = append(cr.CdiDevices, &podresourcesv1.CDIDevice{Name: c})
	}
	return cr
}

// TestContainers lists over a socket what a kubelet would report for two
// pods and resolves each container's devices: a MIG pair's containers each
// get their own device, a memory fraction its GPU with its share ID, and
// another driver's device is left out.
func TestContainers(t *testing.T) {
	const parent = "GPU-0"
	sock := serve(t, &podresourcesv1.ListPodResourcesResponse{PodResources: []*podresourcesv1.PodResources{
		{Name: "mig-pair", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
			{Name: "small", DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "mig-pair-gpu-x", ClaimNamespace: "ns",
				ClaimResources: []*podresourcesv1.ClaimResource{claimResource("gpu.nvidia.com", "gpu-0-mig-1g10gb-19-0", nil, "k8s.gpu.nvidia.com/claim=u-gpu-0-mig-1g10gb-19-0")}}}},
			{Name: "big", DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "mig-pair-gpu-x", ClaimNamespace: "ns",
				ClaimResources: []*podresourcesv1.ClaimResource{claimResource("gpu.nvidia.com", "gpu-0-mig-3g40gb-9-4", nil)}}}},
		}},
		{Name: "fraction", Namespace: "ns", Containers: []*podresourcesv1.ContainerResources{
			{Name: "ctr", DynamicResources: []*podresourcesv1.DynamicResource{{ClaimName: "fraction-gpu-y", ClaimNamespace: "ns",
				ClaimResources: []*podresourcesv1.ClaimResource{
					claimResource("gpu.nvidia.com", "gpu-7", ptr.To("share-1")),
					claimResource("nic.example.com", "nic-0", nil),
				}}}},
			{Name: "sidecar"},
		}},
	}})
	resp, err := dcgmview.List(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	mig := func(name, profile string) resourceapi.Device {
		return device(name, map[string]string{"type": "mig", "parentUUID": parent, "profile": profile})
	}
	ix := dcgmview.NewIndex([]resourceapi.ResourceSlice{slice("gpu.nvidia.com", "node-a", 1, 1,
		mig("gpu-0-mig-1g10gb-19-0", "1g.10gb"), mig("gpu-0-mig-3g40gb-9-4", "3g.40gb"),
		device("gpu-7", map[string]string{"type": "gpu", "uuid": "GPU-7"}))})
	got := dcgmview.Containers(resp, ix)
	want := []dcgmview.ContainerDevice{
		{Namespace: "ns", Pod: "fraction", Container: "ctr", ClaimNamespace: "ns", ClaimName: "fraction-gpu-y",
			Driver: "gpu.nvidia.com", Pool: "node-a", Device: "gpu-7", ShareID: "share-1",
			Resolved: true, Identity: dcgmview.Identity{Type: "gpu", GPUUUID: "GPU-7"}},
		{Namespace: "ns", Pod: "mig-pair", Container: "big", ClaimNamespace: "ns", ClaimName: "mig-pair-gpu-x",
			Driver: "gpu.nvidia.com", Pool: "node-a", Device: "gpu-0-mig-3g40gb-9-4",
			Resolved: true, Identity: dcgmview.Identity{Type: "mig", GPUUUID: parent, Profile: "3g.40gb", Dynamic: &dcgmview.MigSpec{ParentMinor: 0, GIProfileID: 9, PlacementStart: 4}}},
		{Namespace: "ns", Pod: "mig-pair", Container: "small", ClaimNamespace: "ns", ClaimName: "mig-pair-gpu-x",
			Driver: "gpu.nvidia.com", Pool: "node-a", Device: "gpu-0-mig-1g10gb-19-0", CDIDevices: []string{"k8s.gpu.nvidia.com/claim=u-gpu-0-mig-1g10gb-19-0"},
			Resolved: true, Identity: dcgmview.Identity{Type: "mig", GPUUUID: parent, Profile: "1g.10gb", Dynamic: &dcgmview.MigSpec{ParentMinor: 0, GIProfileID: 19, PlacementStart: 0}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("containers:\n got %+v\nwant %+v", got, want)
	}
}

func TestListNamesTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "missing.sock")
	if _, err := dcgmview.List(context.Background(), sock); err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("List over a missing socket: %v, want an error naming %s", err, sock)
	}
}
