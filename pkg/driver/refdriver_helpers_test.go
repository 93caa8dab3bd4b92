// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	inode "github.com/gpu-dra-driver/gpu-dra-driver/internal/node"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// referenceNode is a node that NVIDIA's reference driver served until
// now: its checkpoint (pkg/refdriver's fixture, what its plugin writes) in
// the plugin directory, validated in this boot (the kernel's boot ID), its
// claims in the API, its CDI specs, the device metadata the kubelet helper
// wrote for it, and the MIG device ref-a holds on GPU 0. The fixture's
// prepared claims carry no name (NVIDIA's plugin records none): names
// maps their UIDs to the names the API has.
type referenceNode struct {
	in      *inode.Node
	claims  map[string]refdriver.Claim // by name
	files   []string                   // every file it left
	migGPU  string                     // the UUID of GPU 0
	gpus    []string                   // the UUIDs of the GPUs
	sim     *simulate.Simulator
	profile string
}

// referenceNames are the names of the fixtures' claims in the API.
var referenceNames = map[string]string{
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01": "ref-a", // MIG 1g.10gb on GPU 0
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a02": "ref-b", // GPU 1 whole
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a03": "ref-c", // prepare begun
	// checkpoint-sharing.json
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0b01": "nvd-mps",      // GPU 0 whole, MPS
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0b02": "nvd-ts",       // GPU 1 whole, time slice applied
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0b03": "nvd-vfio",     // GPU 2 on vfio-pci
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0b04": "nvd-vfio-old", // GPU 3 on vfio-pci, no pciBusID recorded
	// checkpoint-shares.json
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0c01": "nvd-mig-1", // a share of a MIG device on GPU 0
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0c02": "nvd-mig-2", // another share of it
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0c03": "nvd-gpu-1", // a share of GPU 1, time-sliced
	"5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0c04": "nvd-gpu-2", // another share of GPU 1
}

// fixtureMig is how the fixtures name the MIG device they hold; the node
// replaces it with the one it made.
const fixtureMig = `"giId":9,"ciId":0,"migUUID":"MIG-5d6c1a9e-0f3b-5b8e-9c3e-7a1d2b3c4d01"`

// kernelBootID is the boot ID NVIDIA's plugin reads on this machine.
func kernelBootID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(DefaultBootIDFile)
	if err != nil {
		t.Skipf("no kernel boot ID: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func newReferenceNode(t *testing.T, profile string) *referenceNode {
	t.Helper()
	return newReferenceNodeFrom(t, profile, "checkpoint.json", nil)
}

// newReferenceNodeFrom is newReferenceNode with another fixture of
// pkg/refdriver's testdata; edit, if set, changes its text before it is
// written (after the GPU UUIDs and the MIG device are put in).
func newReferenceNodeFrom(t *testing.T, profile, fixtureName string, edit func(text string) string) *referenceNode {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; keep the root short.
	root, err := os.MkdirTemp("", "gdra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	r := &referenceNode{in: inode.NewAt(inode.Config{DriverName: testDriver, NodeName: testNode, NodeUID: "node-uid"}, root), claims: map[string]refdriver.Claim{}, profile: profile}
	sim, inv, err := simulate.Discover(profile, testNode, filepath.Join(r.in.StateDir(), "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	r.sim, r.migGPU = sim, inv.GPUs[0].UUID
	for _, g := range inv.GPUs {
		r.gpus = append(r.gpus, g.UUID)
	}
	fixture, err := os.ReadFile(filepath.Join("..", "refdriver", "testdata", fixtureName))
	if err != nil {
		t.Fatal(err)
	}
	replace := []string{"6a1f0f3e-2b9c-4d0e-8e57-3c1b2a9d8f10", kernelBootID(t)}
	for i, uuid := range r.gpus {
		replace = append(replace, fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i), uuid)
	}
	if strings.Contains(string(fixture), fixtureMig) {
		// The MIG device NVIDIA's plugin made (DynamicMIG), on GPU 0.
		g := inv.GPUs[0]
		made, err := mig.Create(g.Device, mig.Placement{Profile: profileByName(t, g.MigProfiles, "1g.10gb"), Start: 0, Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		replace = append(replace, fixtureMig, fmt.Sprintf(`"giId":%d,"ciId":%d,"migUUID":%q`, made.GIID, made.CIID, made.UUID))
	}
	text := strings.NewReplacer(replace...).Replace(string(fixture))
	if edit != nil {
		text = edit(text)
	}
	pluginDir := r.in.Dir("plugin")
	r.write(t, filepath.Join(pluginDir, refdriver.CheckpointFile), []byte(text))
	cp, err := refdriver.ReadCheckpoint(pluginDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cp.Claims {
		c.Namespace, c.Name = "default", referenceNames[c.UID]
		r.claims[c.Name] = c
		obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: types.UID(c.UID)}}
		obj.Status.Allocation = c.Allocation
		if _, err := r.in.Client.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !c.Completed() {
			continue
		}
		// Its CDI spec (cdi.go, CreateClaimSpecFile), shortened.
		r.write(t, r.specPath(c), []byte(fmt.Sprintf("cdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n- name: %s-%s\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n", c.UID, c.Allocation.Devices.Results[0].Device)))
		// The kubelet helper's device metadata (its DeviceMetadata
		// feature gate on): the same names as this driver's.
		request := c.Allocation.Devices.Results[0].Request
		file := filepath.Join(pluginDir, metadataSubDir, c.Namespace+"_"+c.Name, request, "metadata.json")
		r.write(t, file, []byte(`{}`))
		spec, _ := json.Marshal(map[string]any{"cdiVersion": "0.6.0", "kind": testDriver + "/metadata", "devices": []any{map[string]any{
			"name": c.UID + "_" + request, "containerEdits": map[string]any{"mounts": []any{map[string]any{"hostPath": file, "containerPath": "/var/run/kubernetes.io/dra-device-attributes/x"}}},
		}}})
		r.write(t, filepath.Join(r.in.CDIDir(), testDriver+"_metadata_"+c.UID+"_"+request+".json"), spec)
	}
	return r
}

func (r *referenceNode) write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r.files = append(r.files, path)
}

func (r *referenceNode) specPath(c refdriver.Claim) string {
	return filepath.Join(r.in.CDIDir(), "k8s."+testDriver+"-claim_"+c.UID+".yaml")
}

// missing lists the files it left that are gone.
func (r *referenceNode) missing() []string {
	var out []string
	for _, f := range r.files {
		if _, err := os.Stat(f); err != nil {
			out = append(out, strings.TrimPrefix(f, r.in.Root))
		}
	}
	return out
}
