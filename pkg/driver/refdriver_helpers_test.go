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
// now: its checkpoint (pkg/refdriver's fixture, in its format) in the
// plugin directory, its claims in the API, its CDI specs, the device
// metadata the kubelet helper wrote for it, and the MIG devices its
// claims hold on GPU 0 (ref-a's, and ref-c's, whose prepare began).
type referenceNode struct {
	in      *inode.Node
	claims  map[string]refdriver.Claim // by name
	files   []string                   // every file it left
	migGPU  string                     // the UUID of GPU 0
	sim     *simulate.Simulator
	profile string
}

func newReferenceNode(t *testing.T, profile string) *referenceNode {
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
	g := inv.GPUs[0]
	prof := profileByName(t, g.MigProfiles, "1g.10gb")
	for _, start := range []uint32{0, 1} {
		if _, err := mig.Create(g.Device, mig.Placement{Profile: prof, Start: start, Size: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpoint, validated in this boot (its nodeBootID is the
	// node's): the reference driver's claims are live.
	fixture, err := os.ReadFile(filepath.Join("..", "refdriver", "testdata", "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	boot, err := os.ReadFile(sim.BootIDPath())
	if err != nil {
		t.Fatal(err)
	}
	fixture = []byte(strings.ReplaceAll(string(fixture), "6a1f0f3e-2b9c-4d0e-8e57-3c1b2a9d8f10", strings.TrimSpace(string(boot))))
	pluginDir := r.in.Dir("plugin")
	r.write(t, filepath.Join(pluginDir, refdriver.CheckpointFile), fixture)
	cp, err := refdriver.ReadCheckpoint(pluginDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cp.Claims {
		r.claims[c.Name] = c
		obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: types.UID(c.UID)}}
		obj.Status.Allocation = c.Allocation
		if _, err := r.in.Client.ResourceV1().ResourceClaims(c.Namespace).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if c.State != "PrepareCompleted" {
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

func (r *referenceNode) migDevices() int { return r.sim.MigInstanceCount(r.migGPU) }
