// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

func vfioName(minor int) string    { return fmt.Sprintf("gpu-%d-vfio", minor) }
func monitorName(minor int) string { return fmt.Sprintf("gpu-%d-monitor", minor) }

// passthroughNode is newNode with every GPU also offered for passthrough
// and as a monitor device. write, when set, wraps each sysfs write.
func passthroughNode(t *testing.T, write func(write func(path, value string) error) func(path, value string) error) *node {
	t.Helper()
	n := newNode(t, "h100x2", false)
	for _, g := range n.inv.GPUs {
		n.devices[vfioName(g.Minor)] = &AllocatableDevice{Name: vfioName(g.Minor), Kind: configapi.VFIO, GPU: g}
		n.devices[monitorName(g.Minor)] = &AllocatableDevice{Name: monitorName(g.Minor), Kind: configapi.Monitor, GPU: g}
	}
	host := n.sim.VFIO()
	host.Timeout = 2e9
	if write != nil {
		host.Write = write(host.Write)
	}
	n.passthrough = &PassthroughConfig{Host: host, Lookup: n.sim.DeviceGetHandleByUUID, Timeout: 2e9}
	n.restart()
	return n
}

func (n *node) bound(minor int) string { return n.sim.BoundDriver(simulate.PCIBusID(minor)) }

func (n *node) nvmlCount() int {
	c, ret := n.sim.DeviceGetCount()
	if ret != nvml.SUCCESS {
		n.t.Fatal(nvml.ErrorString(ret))
	}
	return c
}

// Prepare binds the GPU to vfio-pci and gives the container the VFIO
// nodes and the address; unprepare binds it back, and NVML sees it again
// through the handle the device table holds.
func TestPassthroughPrepareAndUnprepare(t *testing.T) {
	n := passthroughNode(t, nil)
	c := claim("vm", dev(vfioName(1)))
	n.prepare(c)
	if n.bound(1) != vfio.DriverVFIO || n.bound(0) != vfio.DriverNvidia || n.nvmlCount() != 1 {
		t.Fatalf("after prepare: GPU 1 on %q, GPU 0 on %q, NVML sees %d", n.bound(1), n.bound(0), n.nvmlCount())
	}
	rec, _ := n.store.Get("vm")
	if v := rec.Devices[0].Vfio; v == nil || v.Driver != vfio.DriverVFIO || v.IOMMUGroup != simulate.IOMMUGroup(1) || v.GPU == nil || v.GPU.UUID != n.uuid(1) {
		t.Fatalf("record %+v", rec.Devices[0].Vfio)
	}
	spec, err := os.ReadFile(n.cdi.SpecPath("vm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"containerPath":"/dev/vfio/vfio"`, `"containerPath":"/dev/vfio/` + simulate.IOMMUGroup(1) + `"`,
		`PCI_RESOURCE_VFIO_GPU_NVIDIA_COM=` + simulate.PCIBusID(1)} {
		if !strings.Contains(string(spec), want) {
			t.Errorf("CDI spec lacks %s:\n%s", want, spec)
		}
	}
	if strings.Contains(string(spec), "NVIDIA_VISIBLE_DEVICES") || strings.Contains(string(spec), "/dev/nvidia") {
		t.Errorf("a VM's claim gets the NVIDIA stack:\n%s", spec)
	}
	n.unprepare(c)
	n.assertGone("vm")
	if n.bound(1) != vfio.DriverNvidia || n.nvmlCount() != 2 {
		t.Fatalf("after unprepare: GPU 1 on %q, NVML sees %d", n.bound(1), n.nvmlCount())
	}
	if _, ret := n.devices[gpuName(1)].GPU.Device.GetName(); ret != nvml.SUCCESS {
		t.Fatalf("the table's handle of GPU 1 after rebinding: %s", nvml.ErrorString(ret))
	}
	// The GPU is usable whole again.
	n.prepare(claim("after", dev(gpuName(1))))
}

// No claim gets a device of a GPU that a VM owns, and a VM never gets a
// GPU that another claim holds, admin access (monitoring) included.
func TestPassthroughExclusive(t *testing.T) {
	for _, other := range []result{dev(gpuName(0)), {request: "gpu", device: monitorName(0), admin: true}} {
		t.Run(other.device, func(t *testing.T) {
			n := passthroughNode(t, nil)
			n.prepare(claim("other", other))
			if _, err := n.tryPrepare(claim("vm", dev(vfioName(0)))); err == nil || !strings.Contains(err.Error(), "already prepared for claim other") {
				t.Fatalf("passthrough beside %s: %v", other.device, err)
			}
			if n.bound(0) != vfio.DriverNvidia {
				t.Fatalf("GPU 0 on %q after a refused passthrough", n.bound(0))
			}
			n.unprepare(claim("other", other))
			n.prepare(claim("vm", dev(vfioName(0))))
			if _, err := n.tryPrepare(claim("other2", other)); err == nil {
				t.Fatalf("%s prepared on a passed-through GPU", other.device)
			}
		})
	}
}

// A process on the GPU, or an IOMMU group shared with another device,
// refuses passthrough and leaves the GPU on nvidia with no record.
func TestPassthroughRefusals(t *testing.T) {
	n := passthroughNode(t, nil)
	if err := n.sim.SetInUse(n.uuid(0), true); err != nil {
		t.Fatal(err)
	}
	_, err := n.tryPrepare(claim("vm", dev(vfioName(0))))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(simulate.SimulatedPID)) {
		t.Fatalf("passthrough of a GPU in use: %v", err)
	}
	n.assertGone("vm")
	other := filepath.Join(n.sim.SysfsRoot(), "kernel/iommu_groups", simulate.IOMMUGroup(1), "devices", "0000:99:00.0")
	if err := os.Symlink("/nonexistent", other); err != nil {
		t.Fatal(err)
	}
	_, err = n.tryPrepare(claim("vm2", dev(vfioName(1))))
	if err == nil || !strings.Contains(err.Error(), "0000:99:00.0") {
		t.Fatalf("passthrough with a foreign device in the group: %v", err)
	}
	n.assertGone("vm2")
	if n.bound(0) != vfio.DriverNvidia || n.bound(1) != vfio.DriverNvidia || n.nvmlCount() != 2 {
		t.Fatalf("after refusals: %q %q, NVML sees %d", n.bound(0), n.bound(1), n.nvmlCount())
	}
}

// A reboot binds the GPU to nvidia; start restores the prepared claim by
// binding it to vfio-pci again. Then unprepare returns it.
func TestPassthroughRestoredAfterReboot(t *testing.T) {
	n := passthroughNode(t, nil)
	c := claim("vm", dev(vfioName(0)))
	n.prepare(c)
	if err := n.sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	if n.bound(0) != vfio.DriverNvidia {
		t.Fatalf("simulated reboot left GPU 0 on %q", n.bound(0))
	}
	n.restart()
	report := n.state.RecoverLocal(context.Background())
	if len(report.Problems) > 0 || report.Restored != 1 {
		t.Fatalf("recover: %+v", report)
	}
	if n.bound(0) != vfio.DriverVFIO {
		t.Fatalf("after restore GPU 0 on %q, want vfio-pci", n.bound(0))
	}
	if _, err := os.Stat(filepath.Join(n.sim.Dir, "dev/vfio", simulate.IOMMUGroup(0))); err != nil {
		t.Fatalf("group node after restore: %v", err)
	}
	n.unprepare(c)
	if n.bound(0) != vfio.DriverNvidia || n.nvmlCount() != 2 {
		t.Fatalf("after unprepare GPU 0 on %q", n.bound(0))
	}
}

// agrees checks the invariant of every kill: the GPU is bound as the
// claim's record says (prepared: vfio-pci; none: nvidia), and NVML sees
// exactly the GPUs on nvidia.
func (n *node) agrees(uid types.UID, minor int) {
	n.t.Helper()
	want := vfio.DriverNvidia
	if rec, ok := n.store.Get(uid); ok {
		if !rec.Prepared() {
			n.t.Fatalf("after recovery the record is %s", rec.State)
		}
		want = vfio.DriverVFIO
	}
	if got := n.bound(minor); got != want {
		n.t.Fatalf("GPU %d on %q, its record says %q", minor, got, want)
	}
	wantCount := 2
	if want == vfio.DriverVFIO {
		wantCount = 1
	}
	if n.nvmlCount() != wantCount {
		n.t.Fatalf("NVML sees %d GPUs, want %d", n.nvmlCount(), wantCount)
	}
}

// A kill before and after every sysfs write of prepare and of unprepare
// (and, through them, between each record write and the next write):
// the next start ends with the GPU bound as its record says, and the
// kubelet's retry then finishes the job.
func TestPassthroughKilledAtEveryStep(t *testing.T) {
	k := &killer{}
	wrap := func(w func(path, value string) error) func(path, value string) error {
		return func(path, value string) error {
			k.point()
			err := w(path, value)
			k.point()
			return err
		}
	}
	c := claim("vm", dev(vfioName(0)))
	for _, op := range []string{"prepare", "unprepare"} {
		for at := 1; ; at++ {
			n := passthroughNode(t, wrap)
			if op == "unprepare" {
				n.prepare(c)
			}
			k.arm(at)
			killed := k.run(func() {
				if op == "prepare" {
					_, _ = n.state.Prepare(context.Background(), c)
				} else {
					_ = n.state.Unprepare(context.Background(), ref(c))
				}
			})
			if !killed {
				if at < 4 {
					t.Fatalf("%s passed only %d kill points", op, at-1)
				}
				t.Logf("%s: killed at each of %d points, every start ended bound as the record says", op, at-1)
				break
			}
			n.restart()
			if r := n.state.RecoverLocal(context.Background()); len(r.Problems) > 0 {
				t.Fatalf("%s killed at %d: recover: %v", op, at, r.Problems)
			}
			n.agrees("vm", 0)
			// The kubelet retries what it asked for.
			if op == "prepare" {
				n.prepare(c)
				if n.bound(0) != vfio.DriverVFIO {
					t.Fatalf("prepare retried after a kill at %d: GPU on %q", at, n.bound(0))
				}
			} else {
				n.unprepare(c)
				n.assertGone("vm")
				n.agrees("vm", 0)
			}
		}
	}
}
