// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package dcgmview

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// SocketPath is the kubelet's PodResources socket under its root directory
// (pod-resources/kubelet.sock; the exporter mounts /var/lib/kubelet/pod-resources).
func SocketPath(kubeletDir string) string {
	return kubeletDir + "/pod-resources/kubelet.sock"
}

// List calls the kubelet's PodResources List over its unix socket, as the
// exporter does each scrape (kubernetes.go, connectToServer and
// PodMapper.listPods).
func List(ctx context.Context, socket string) (*podresourcesv1.ListPodResourcesResponse, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("PodResources socket %s: %w", socket, err)
	}
	defer conn.Close()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("PodResources List over %s: %w", socket, err)
	}
	return resp, nil
}

// ContainerDevice is one DRA device of a container as the PodResources API
// lists it, with the exporter's identity of it.
type ContainerDevice struct {
	Namespace, Pod, Container string
	ClaimNamespace, ClaimName string
	Driver, Pool, Device      string
	// ShareID is set for a share of a device with consumable capacity
	// (a memory fraction): the device is the GPU, the share one of many.
	ShareID    string
	CDIDevices []string
	// Resolved says whether the exporter attributes the device to a GPU;
	// Identity is meaningful only then.
	Resolved bool
	Identity Identity
}

// Containers lists the DRA devices of every container in resp, resolved
// through ix, the way kubernetes.go PodMapper.toDeviceToPodsDRA walks
// PodResources: pod, container, DynamicResources (one per claim), then its
// ClaimResources (one per allocated device: driver, pool and device
// names). Devices of other drivers are left out, as the exporter skips them.
// The order is by namespace, pod, container, claim and device.
func Containers(resp *podresourcesv1.ListPodResourcesResponse, ix Index) []ContainerDevice {
	var out []ContainerDevice
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, dr := range c.GetDynamicResources() {
				for _, cr := range dr.GetClaimResources() {
					if cr.GetDriverName() != DriverName {
						continue
					}
					cd := ContainerDevice{
						Namespace: p.GetNamespace(), Pod: p.GetName(), Container: c.GetName(),
						ClaimNamespace: dr.GetClaimNamespace(), ClaimName: dr.GetClaimName(),
						Driver: cr.GetDriverName(), Pool: cr.GetPoolName(), Device: cr.GetDeviceName(),
						ShareID: cr.GetShareId(),
					}
					for _, cdi := range cr.GetCdiDevices() {
						cd.CDIDevices = append(cd.CDIDevices, cdi.GetName())
					}
					cd.Identity, cd.Resolved = ix.Resolve(cd.Pool, cd.Device)
					out = append(out, cd)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		for _, k := range [][2]string{{a.Namespace, b.Namespace}, {a.Pod, b.Pod}, {a.Container, b.Container}, {a.ClaimName, b.ClaimName}, {a.Device, b.Device}} {
			if k[0] != k[1] {
				return k[0] < k[1]
			}
		}
		return false
	})
	return out
}
