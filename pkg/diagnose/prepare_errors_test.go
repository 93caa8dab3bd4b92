// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/step"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// failingEdits makes every CDI spec write fail while fail is set, as a full
// disk or a broken nvcdi would.
type failingEdits struct {
	cdi.SimulatedEdits
	fail atomic.Bool
}

func (f *failingEdits) ForClaim(devices []cdi.Device) (cdispec.ContainerEdits, error) {
	if f.fail.Load() {
		return cdispec.ContainerEdits{}, errors.New("injected CDI failure")
	}
	return f.SimulatedEdits.ForClaim(devices)
}

type noStatus struct{}

func (noStatus) Prepared(*resourceapi.ResourceClaim, []checkpoint.PreparedDevice) {}

// preparedNode is pkg/prepare on one simulated H100 offered whole and for
// dynamic MIG, wired as the plugin wires it.
type preparedNode struct {
	sim   *simulate.Simulator
	gpu   *nvdev.GPU
	edits *failingEdits
	state *prepare.State
}

const testNode = "vm"

func newPreparedNode(t *testing.T) *preparedNode {
	t.Helper()
	dir := t.TempDir()
	sim, inv, err := simulate.Discover("h100x1", testNode, filepath.Join(dir, "sim"))
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[0]
	devices := map[string]*prepare.AllocatableDevice{"gpu-0": {Name: "gpu-0", Kind: configapi.WholeGPU, GPU: g, Partitionable: true}}
	for _, prof := range g.MigProfiles {
		for _, pl := range prof.Placements {
			name := resourceslices.DynamicMigDeviceName(g.Minor, prof, pl.Start)
			devices[name] = &prepare.AllocatableDevice{Name: name, Kind: configapi.DynamicMIG, GPU: g, Placement: mig.Placement{Profile: prof, Start: pl.Start, Size: pl.Size}}
		}
	}
	store, _, err := checkpoint.Open(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	edits := &failingEdits{SimulatedEdits: cdi.SimulatedEdits{DevicePath: sim.DevicePath, ControlDevicePath: sim.ControlDevicePath(), MigDevicePath: sim.MigDevicePath}}
	w, err := cdi.NewWriter(filepath.Join(dir, "cdi"), "gpu.nvidia.com", edits)
	if err != nil {
		t.Fatal(err)
	}
	state := prepare.New(prepare.Config{
		DriverName: "gpu.nvidia.com", PoolName: testNode, Devices: devices, Ledger: ledger.New(store), CDI: w, Status: noStatus{}, BootID: sim.BootID(),
	})
	return &preparedNode{sim: sim, gpu: g, edits: edits, state: state}
}

// allocated is a claim ns/c allocated device on this node, with an opaque
// claim config when config is not empty.
func allocated(device, config string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: types.UID("uid-" + device)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}},
		}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.nvidia.com", Pool: testNode, Device: device}},
		}}},
	}
	if config != "" {
		c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
			Source: resourceapi.AllocationConfigSourceClaim,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: "gpu.nvidia.com", Parameters: runtime.RawExtension{Raw: []byte(config)},
			}},
		}}
	}
	return c
}

// TestRealPrepareErrors provokes prepare failures in pkg/prepare, wraps
// them as the driver and the kubelet do into the pod's
// FailedPrepareDynamicResources event, and checks the step and verdict
// diagnose gives them.
func TestRealPrepareErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		provoke func(t *testing.T, n *preparedNode) *resourceapi.ResourceClaim
		step    step.Step
		verdict []string
	}{{
		name: "bad config",
		provoke: func(_ *testing.T, _ *preparedNode) *resourceapi.ResourceClaim {
			return allocated("gpu-0", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"intervall":"Short"}}}`)
		},
		step:    step.Config,
		verdict: []string{`the claim's opaque config is invalid: devices.config[0] (from claim): GpuConfig: unknown field "sharing.timeSlicingConfig.intervall". Fix that field`},
	}, {
		name: "MIG failure",
		provoke: func(t *testing.T, n *preparedNode) *resourceapi.ResourceClaim {
			if err := n.sim.SetFault(n.gpu.UUID, nvml.ERROR_UNKNOWN); err != nil {
				t.Fatal(err)
			}
			return allocated("gpu-0-mig-1g10gb-19-3", "")
		},
		step:    step.MIG,
		verdict: []string{"configuring MIG failed: device gpu-0-mig-1g10gb-19-3: ", "nvidia-smi mig -lgi"},
	}, {
		name: "CDI write failure",
		provoke: func(_ *testing.T, n *preparedNode) *resourceapi.ResourceClaim {
			n.edits.fail.Store(true)
			return allocated("gpu-0", "")
		},
		step:    step.CDI,
		verdict: []string{"writing the CDI spec failed: write CDI spec: ", "injected CDI failure"},
	}, {
		name: "device gone",
		provoke: func(_ *testing.T, _ *preparedNode) *resourceapi.ResourceClaim {
			return allocated("gpu-7", "")
		},
		step:    step.Device,
		verdict: []string{"the allocated device is gone from the node: device gpu-7 is not published by this node", "Delete the pod"},
	}, {
		name: "device held by another claim",
		provoke: func(t *testing.T, n *preparedNode) *resourceapi.ResourceClaim {
			if _, err := n.state.Prepare(context.Background(), allocated("gpu-0", "")); err != nil {
				t.Fatal(err)
			}
			return allocated("gpu-0-mig-1g10gb-19-0", "")
		},
		step:    step.Reserve,
		verdict: []string{"in use by another claim prepared on the node: device gpu-0-mig-1g10gb-19-0 shares GPU hardware with device gpu-0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			n := newPreparedNode(t)
			claim := tc.provoke(t, n)
			_, err := n.state.Prepare(context.Background(), claim)
			if err == nil {
				t.Fatal("prepare succeeded")
			}
			if got, ok := step.Of(err); !ok || got != tc.step {
				t.Errorf("step.Of(%q) = %q, %v; want %q", err, got, ok, tc.step)
			}
			if !strings.HasPrefix(err.Error(), step.Prefix+string(tc.step)+": ") {
				t.Errorf("error %q does not start with its step marker", err)
			}
			// pkg/driver, then the kubelet's DRA manager and pod event.
			driverErr := fmt.Errorf("prepare claim %s/%s: %w", claim.Namespace, claim.Name, err)
			event := fmt.Sprintf("Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed for ResourceClaim %s: %s", claim.Name, driverErr)
			failed, verdict := classifyPrepareError(event)
			if failed != string(tc.step) {
				t.Errorf("classified as step %q, want %q: %s", failed, tc.step, event)
			}
			for _, want := range tc.verdict {
				if !strings.Contains(verdict, want) {
					t.Errorf("verdict lacks %q:\n%s", want, verdict)
				}
			}
			if strings.Contains(verdict, "NodePrepareResources") || strings.Contains(verdict, step.Prefix) {
				t.Errorf("verdict quotes the wrapping:\n%s", verdict)
			}

			// The whole diagnosis, from the event on the pod.
			f := clusterviewtest.Load(t, filepath.Join("testdata", "prepare-bad-config.yaml"))
			f.Snapshot.Events[0].Message = event
			r := DiagnosePod(&f.Snapshot, "ns", "p")
			if r.Status != Blocked || r.Prepare == nil || r.Prepare.Step != string(tc.step) || !strings.HasSuffix(r.Verdict, verdict) {
				t.Errorf("diagnosis %s, step %+v, verdict:\n%s", r.Status, r.Prepare, r.Verdict)
			}
		})
	}
}
