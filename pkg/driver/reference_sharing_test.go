// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// The take-over of claims NVIDIA's plugin prepared with MPS, time-slicing,
// passthrough and consumable shares (issue 58), against the fixtures
// pkg/refdriver/testdata/README.md describes.

// nvidiaNamespace is the namespace of NVIDIA's release in these tests.
const nvidiaNamespace = "nvidia-dra"

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// nvidiaMPSDeployment is the Deployment NVIDIA's plugin creates for an MPS
// control daemon (templates/mps-control-daemon.tmpl.yaml at 95932046),
// the parts the release reads.
func nvidiaMPSDeployment(namespace, id string) *appsv1.Deployment {
	name := refdriver.MPSDeployment(id)
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{NodeName: testNode, HostPID: true}},
		},
	}
}

// chartDeploymentRBAC makes the fake API server answer Deployment calls
// as the chart's RBAC does: delete in NVIDIA's namespace (the Role of
// templates/takeover.yaml), nothing else anywhere.
func chartDeploymentRBAC(r *referenceNode) {
	r.in.Client.PrependReactor("*", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "delete" && a.GetNamespace() == nvidiaNamespace {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "",
			fmt.Errorf("the chart grants no %s of deployments in namespace %q", a.GetVerb(), a.GetNamespace()))
	})
}

// computeModes records the compute modes the plugin sets, standing in for
// NVML's (the simulator has none).
type computeModes struct {
	sharing.TimeSlicer
	mu  sync.Mutex
	set map[string]nvml.ComputeMode
}

func (c *computeModes) SetComputeMode(uuid string, mode nvml.ComputeMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set = map[string]nvml.ComputeMode{}
	}
	c.set[uuid] = mode
	return nil
}

func (c *computeModes) get(uuid string) (nvml.ComputeMode, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.set[uuid]
	return m, ok
}

// withComputeModes wraps the backend's time slicer with c.
func withComputeModes(c *computeModes) func(*Config) {
	return func(cfg *Config) {
		c.TimeSlicer = cfg.Backend.TimeSlicer
		cfg.Backend.TimeSlicer = c
	}
}

// TestReferenceMPSClaimReleasedInNVIDIAsNamespace (issue 58, defect 1): a
// claim NVIDIA prepared under MPS. On main the release listed Deployments
// in every namespace, which the chart does not grant: every unprepare
// failed, the GPU stayed held. Now it deletes NVIDIA's daemon Deployment
// by name in NVIDIA's namespace (chart value takeover.nvidiaNamespace),
// the only Deployment call the chart allows, and nothing of the same
// name elsewhere; the daemon's directory goes, and the GPU's compute mode
// is set back from EXCLUSIVE_PROCESS to DEFAULT as NVIDIA's
// MpsControlDaemon.Stop does (sharing.go).
func TestReferenceMPSClaimReleasedInNVIDIAsNamespace(t *testing.T) {
	r := newReferenceNodeFrom(t, "h100x4", "checkpoint-sharing.json", nil)
	ctx := context.Background()
	id := r.claims["nvd-mps"].MPSDaemons[0]
	for _, ns := range []string{nvidiaNamespace, "tenant"} {
		if _, err := r.in.Client.AppsV1().Deployments(ns).Create(ctx, nvidiaMPSDeployment(ns, id), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := refdriver.MPSDir(r.in.Dir("plugin"), id)
	for _, sub := range []string{"pipe", "log", "shm"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chartDeploymentRBAC(r)

	// Not told NVIDIA's namespace: the unprepare fails, saying which
	// chart value to set.
	d := startReference(t, r)
	err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-mps"))
	if err == nil || !strings.Contains(err.Error(), "takeover.nvidiaNamespace") || !strings.Contains(err.Error(), refdriver.MPSDeployment(id)) {
		t.Fatalf("unprepare without NVIDIA's namespace: %v, want an error naming the Deployment and takeover.nvidiaNamespace", err)
	}
	d.Stop()

	modes := &computeModes{}
	startReferenceWith(t, r, func(c *Config) {
		c.ReferenceNamespace = nvidiaNamespace
		withComputeModes(modes)(c)
	})
	if err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-mps")); err != nil {
		t.Fatalf("unprepare of NVIDIA's MPS claim: %v", err)
	}
	if _, err := r.in.Client.Tracker().Get(deploymentsGVR, nvidiaNamespace, refdriver.MPSDeployment(id)); !apierrors.IsNotFound(err) {
		t.Errorf("NVIDIA's MPS daemon Deployment is still there: %v", err)
	}
	if _, err := r.in.Client.Tracker().Get(deploymentsGVR, "tenant", refdriver.MPSDeployment(id)); err != nil {
		t.Errorf("a Deployment of the same name in another namespace was touched: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the daemon's directory %s is still there: %v", dir, err)
	}
	if m, ok := modes.get(r.gpus[0]); !ok || m != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("compute mode of GPU 0 after the MPS release: %v (set %v), want DEFAULT", m, ok)
	}
	if n := len(r.in.Client.Actions()); n == 0 {
		t.Fatal("no API calls recorded")
	}
	for _, a := range r.in.Client.Actions() {
		if a.GetResource().Resource == "deployments" && (a.GetVerb() != "delete" || a.GetNamespace() != nvidiaNamespace) {
			if a.GetVerb() == "create" && a.GetNamespace() != "" {
				continue // the test's own
			}
			t.Errorf("Deployment call %s in namespace %q: the chart grants only delete in %s", a.GetVerb(), a.GetNamespace(), nvidiaNamespace)
		}
	}
}

// TestReferenceTimeSliceReset (issue 58, defect 5): NVIDIA's unprepare
// sets a GPU it applied a time slice to back to the default slice (and
// compute mode DEFAULT, as its SetTimeSlice does first); on main it kept
// the slice NVIDIA's claim asked for.
func TestReferenceTimeSliceReset(t *testing.T) {
	r := newReferenceNodeFrom(t, "h100x4", "checkpoint-sharing.json", nil)
	if err := r.sim.SetTimeSlice(r.gpus[1], configapi.LongTimeSlice); err != nil { // as NVIDIA's prepare did
		t.Fatal(err)
	}
	modes := &computeModes{}
	d := startReferenceWith(t, r, withComputeModes(modes))
	if err := r.in.Unprepare(context.Background(), r.claimObj(t, "nvd-ts")); err != nil {
		t.Fatal(err)
	}
	if got := d.cfg.Backend.Simulator.TimeSlice(r.gpus[1]); got != string(configapi.DefaultTimeSlice) {
		t.Errorf("time slice of GPU 1 after the release: %s, want Default", got)
	}
	if m, ok := modes.get(r.gpus[1]); !ok || m != nvml.COMPUTEMODE_DEFAULT {
		t.Errorf("compute mode of GPU 1: %v (set %v), want DEFAULT", m, ok)
	}
}

// TestReferenceVFIOBoundBack (issue 58, defect 3): GPUs NVIDIA passed
// through to VMs (bound to vfio-pci, gone from NVML) are bound back to
// nvidia at the release, as NVIDIA's unprepare does (vfio-device.go,
// Unconfigure); on main they stayed on vfio-pci. The older format without
// a PCI address is found by NVIDIA's UUID of each address.
func TestReferenceVFIOBoundBack(t *testing.T) {
	a2, a3 := simulate.PCIBusID(2), simulate.PCIBusID(3)
	r := newReferenceNodeFrom(t, "h100x4", "checkpoint-sharing.json", strings.NewReplacer(
		"0000:3b:00.0", a2, refdriver.VfioUUID("0000:3b:00.0"), refdriver.VfioUUID(a2),
		refdriver.VfioUUID("0000:5e:00.0"), refdriver.VfioUUID(a3),
	).Replace)
	for _, addr := range []string{a2, a3} { // as NVIDIA's prepare did
		if err := r.sim.VFIO().Bind(addr, vfio.DriverVFIO); err != nil {
			t.Fatal(err)
		}
	}
	d := startReference(t, r)
	host := d.cfg.Backend.VFIO
	for name, addr := range map[string]string{"nvd-vfio": a2, "nvd-vfio-old": a3} {
		if err := r.in.Unprepare(context.Background(), r.claimObj(t, name)); err != nil {
			t.Fatalf("unprepare %s: %v", name, err)
		}
		if drv, err := host.Driver(addr); err != nil || drv != vfio.DriverNvidia {
			t.Errorf("%s: GPU %s bound to %q (%v) after the release, want nvidia", name, addr, drv, err)
		}
	}
}

// TestReferenceVFIORefusesAMismatchedAddress: the PCI address of a VFIO
// device must be the one NVIDIA's UUID of it names; a damaged checkpoint
// naming another device (a NIC) is not rebound.
func TestReferenceVFIORefusesAMismatchedAddress(t *testing.T) {
	a2 := simulate.PCIBusID(2)
	r := newReferenceNodeFrom(t, "h100x4", "checkpoint-sharing.json", strings.NewReplacer("0000:3b:00.0", a2).Replace)
	if err := r.sim.VFIO().Bind(a2, vfio.DriverVFIO); err != nil {
		t.Fatal(err)
	}
	d := startReference(t, r)
	err := r.in.Unprepare(context.Background(), r.claimObj(t, "nvd-vfio"))
	if err == nil || !strings.Contains(err.Error(), a2) {
		t.Errorf("unprepare with an address that is not the UUID's: %v, want an error naming %s", err, a2)
	}
	if drv, _ := d.cfg.Backend.VFIO.Driver(a2); drv != vfio.DriverVFIO {
		t.Errorf("GPU %s bound to %q, want it left on vfio-pci", a2, drv)
	}
}

// TestReferenceSharedMigKeptWhileShared (issue 58, defect 2): with
// NVIDIA's ConsumableShares and DynamicMIG, two of its claims share a MIG
// device and two a GPU. On main the first release destroyed the MIG
// device under the second claim. Now it stays until the last share goes,
// as NVIDIA's unprepare does (isMigDeviceInUseByOtherClaims), and then MIG
// mode goes off as NVIDIA's deleteMigDevice does (maybeDisableMigMode,
// defect 5); the shared GPU's time slice is reset only at its last share
// (isGpuUUIDInUseByOtherClaims).
func TestReferenceSharedMigKeptWhileShared(t *testing.T) {
	r := newReferenceNodeFrom(t, "h100x2", "checkpoint-shares.json", nil)
	if err := r.sim.SetTimeSlice(r.gpus[1], configapi.LongTimeSlice); err != nil {
		t.Fatal(err)
	}
	d := startReference(t, r)
	ctx := context.Background()
	sim := d.cfg.Backend.Simulator
	if err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-mig-1")); err != nil {
		t.Fatal(err)
	}
	if n := sim.MigInstanceCount(r.migGPU); n != 1 {
		t.Fatalf("%d MIG devices on GPU 0 after the first share's release, want the one nvd-mig-2 still uses", n)
	}
	if _, err := r.in.Prepare(ctx, allocated("other", "gpu-0-mig-1g10gb-19-0")); err == nil {
		t.Error("the MIG device nvd-mig-2 still uses was prepared for another claim")
	}
	if err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-mig-2")); err != nil {
		t.Fatal(err)
	}
	if n := sim.MigInstanceCount(r.migGPU); n != 0 {
		t.Errorf("%d MIG devices on GPU 0 after the last share's release, want 0", n)
	}
	requireMigModeOff(t, d, r.migGPU)

	if err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-gpu-1")); err != nil {
		t.Fatal(err)
	}
	if got := sim.TimeSlice(r.gpus[1]); got != string(configapi.LongTimeSlice) {
		t.Errorf("time slice of GPU 1 while nvd-gpu-2 still shares it: %s, want Long", got)
	}
	if err := r.in.Unprepare(ctx, r.claimObj(t, "nvd-gpu-2")); err != nil {
		t.Fatal(err)
	}
	if got := sim.TimeSlice(r.gpus[1]); got != string(configapi.DefaultTimeSlice) {
		t.Errorf("time slice of GPU 1 after its last share: %s, want Default", got)
	}
}

// TestReferenceMigModeOffAfterLastMigDevice (issue 58, defect 5): on
// main MIG mode stayed on once the last of NVIDIA's MIG devices on a GPU
// was destroyed; NVIDIA turns it off where the GPU can without a reset.
func TestReferenceMigModeOffAfterLastMigDevice(t *testing.T) {
	r := newReferenceNode(t, "h100x2")
	d := startReference(t, r)
	if err := r.in.Unprepare(context.Background(), r.claimObj(t, "ref-a")); err != nil {
		t.Fatal(err)
	}
	requireMigModeOff(t, d, r.migGPU)
}

func requireMigModeOff(t *testing.T, d *Driver, gpu string) {
	t.Helper()
	dev, ret := d.cfg.Backend.NVML.DeviceGetHandleByUUID(gpu)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if current, pending, ret := dev.GetMigMode(); ret != nvml.SUCCESS || current != nvml.DEVICE_MIG_DISABLE || pending != nvml.DEVICE_MIG_DISABLE {
		t.Errorf("MIG mode of GPU %s: current %d, pending %d (%s), want off", gpu, current, pending, nvml.ErrorString(ret))
	}
}
