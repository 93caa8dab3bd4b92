// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// publishedNames waits until the pool the API holds has device want (a
// restarted plugin replaces the slices of the one before), then lists it.
func publishedNames(n *node, want string) []string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var names []string
		for _, s := range n.publishedSlices() {
			for _, d := range s.Spec.Devices {
				names = append(names, d.Name)
			}
		}
		if slices.Contains(names, want) || time.Now().After(deadline) {
			return names
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A GPU handed to a VM stays published, with its other devices, across a
// plugin restart although NVML no longer sees it; they wait while the VM
// has it, and are preparable once unprepare has bound it back, through a
// handle the restarted plugin never had.
func TestPassthroughAcrossRestart(t *testing.T) {
	n := newMigNode(t, "h100x2")
	n.passthrough = resourceslices.PassthroughSelector{All: true}
	n.restart("h100x2")
	sim := n.driverSim()
	vm := n.claim("vm", []string{"gpu-1-vfio"})
	n.mustPrepare(vm)
	if d := sim.BoundDriver(simulate.PCIBusID(1)); d != vfio.DriverVFIO {
		t.Fatalf("GPU 1 on %q after prepare", d)
	}
	rec, _ := n.driver.state.Ledger.Get(vm.UID)
	attrs := n.driver.meta.attributes(rec.Devices[0])
	if a := attrs["resource.kubernetes.io/pciBusID"]; a.StringValue == nil || *a.StringValue != simulate.PCIBusID(1) {
		t.Fatalf("device metadata pciBusID %+v", a)
	}
	if a := attrs[deviceattr.AttrIOMMUGroup]; a.StringValue == nil || *a.StringValue != simulate.IOMMUGroup(1) {
		t.Fatalf("device metadata iommuGroup %+v", a)
	}

	n.restart("h100x2")
	if c, _ := n.driverSim().DeviceGetCount(); c != 1 {
		t.Fatalf("NVML sees %d GPUs with one passed through", c)
	}
	names := publishedNames(n, "gpu-1-vfio")
	for _, want := range []string{"gpu-1", "gpu-1-vfio", "gpu-1-mig-1g10gb-19-0", "gpu-1-monitor"} {
		if !slices.Contains(names, want) {
			t.Fatalf("after restart %s is not published: %v", want, names)
		}
	}
	whole := n.claim("whole", []string{"gpu-1"})
	if res := n.prepare(whole)[string(whole.UID)]; res.GetError() == "" {
		t.Fatal("gpu-1 prepared while a VM has the GPU")
	}
	if st, _ := n.driver.health.Status("gpu-1"); !st.Healthy {
		t.Fatalf("GPU 1 tainted while passed through: %+v", st)
	}
	if res := n.unprepare(vm)[string(vm.UID)]; res.GetError() != "" {
		t.Fatal(res.GetError())
	}
	if d := n.driverSim().BoundDriver(simulate.PCIBusID(1)); d != vfio.DriverNvidia {
		t.Fatalf("GPU 1 on %q after unprepare", d)
	}
	n.mustPrepare(whole)
	n.unprepare(whole)
	n.mustPrepare(n.claim("mig", []string{"gpu-1-mig-1g10gb-19-0"}))
}

// A --passthrough-gpus entry that names no GPU of the node (a typo, or a
// GPU that is lost) does not stop start: the node publishes what it has,
// and a Warning Event on the Node names the flag and the entry.
func TestPassthroughUnknownGPU(t *testing.T) {
	root := t.TempDir()
	be, err := backend.Open(backend.Options{SimulateProfile: "h100x1", NodeName: testNode, StateDir: filepath.Join(root, "state")})
	if err != nil {
		t.Fatal(err)
	}
	client := fakeapi.NewClientset()
	d, err := Start(context.Background(), Config{
		DriverName: testDriver, NodeName: testNode, Client: client, Backend: be,
		StateDir: filepath.Join(root, "state"), CDIDir: filepath.Join(root, "cdi"), PluginDir: filepath.Join(root, "p"), RegistrarDir: filepath.Join(root, "r"),
		Publish: resourceslices.Options{Passthrough: resourceslices.PassthroughSelector{Names: []string{"0000:99:00.0"}}},
	})
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	defer d.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
			return e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "--passthrough-gpus") && strings.Contains(e.Message, "0000:99:00.0")
		})
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Warning event names the unmatched entry: %+v", evs.Items)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.RemoveAll(root)
}

func (n *node) driverSim() *simulate.Simulator { return n.driver.cfg.Backend.Simulator }
