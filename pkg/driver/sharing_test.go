// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// sharedClaim is a memory-fraction allocation as the scheduler makes it:
// a share ID and the consumed capacity.
func (n *node) sharedClaim(name, device, memory, compute string, configs ...string) *resourceapi.ResourceClaim {
	n.t.Helper()
	c := n.claim(name, []string{device}, configs...)
	r := &c.Status.Allocation.Devices.Results[0]
	r.ShareID = ptrUID(types.UID("share-" + name))
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}
	if compute != "" {
		r.ConsumedCapacity["computePercentage"] = resource.MustParse(compute)
	}
	updated, err := n.client.ResourceV1().ResourceClaims("default").Update(context.Background(), c, metav1.UpdateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return updated
}

func ptrUID(u types.UID) *types.UID { return &u }

func (n *node) mps(uuid string) (*sharing.MPS, *sharing.Daemon) {
	m := n.driver.state.Sharing.MPS
	return m, m.Daemon(uuid)
}

func envOf(t *testing.T, n *node, ids []string) []string {
	t.Helper()
	return inject(t, n.dir("cdi"), ids...).Process.Env
}

func TestTimeSlicingAppliedAndRestored(t *testing.T) {
	n := newNode(t, "h100x1")
	sim := n.driver.cfg.Backend.Simulator
	gpu := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	claim := n.claim("ts", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`)
	n.mustPrepare(claim)
	if got := sim.TimeSlice(gpu); got != "Long" {
		t.Fatalf("time slice %q, want Long", got)
	}
	n.unprepare(claim)
	if got := sim.TimeSlice(gpu); got != "Default" {
		t.Fatalf("time slice %q after the last claim, want Default", got)
	}
	// No config changes nothing.
	n.mustPrepare(n.claim("plain", []string{"gpu-0"}))
	if got := sim.TimeSlice(gpu); got != "Default" {
		t.Fatalf("a claim without sharing config changed the time slice to %q", got)
	}
}

// The time slice belongs to the whole GPU: a MIG device's claim must not
// change it under the other MIG devices' tenants.
func TestTimeSlicingOnMigLeavesTheParentGPUAlone(t *testing.T) {
	n := newMigNode(t, "h100x1")
	sim := n.driver.cfg.Backend.Simulator
	gpu := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	long := n.claim("ts-long", []string{"gpu-0-mig-1g10gb-19-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`)
	if e := n.prepare(long)["uid-ts-long"].GetError(); !strings.Contains(e, "sharing.timeSlicingConfig.interval: Long cannot be set on MIG device") || !strings.Contains(e, "leave the interval out") {
		t.Fatalf("a Long time slice on a MIG device: %q", e)
	}
	plain := n.claim("ts-default", []string{"gpu-0-mig-1g10gb-19-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing"}}`)
	n.mustPrepare(plain)
	if got := sim.TimeSlice(gpu); got != "Default" {
		t.Fatalf("a MIG device's claim set the parent GPU's time slice to %q", got)
	}
	if rec, _ := n.driver.state.Ledger.Get(plain.UID); rec.Devices[0].Sharing != nil {
		t.Fatalf("a MIG device's time-slicing claim recorded sharing %+v to undo", rec.Devices[0].Sharing)
	}
	n.unprepare(plain)
}

func TestMPSDaemonLifecycleAndLimits(t *testing.T) {
	n := newNode(t, "h100x2")
	gpu := n.driver.cfg.Backend.Inventory.GPUs[1].UUID
	claim := n.claim("mps", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`)
	ids := n.mustPrepare(claim)
	m, d := n.mps(gpu)
	pid, running := m.PID(d)
	if !running {
		t.Fatal("no MPS daemon after prepare")
	}
	// The limits ride on the client's environment, not on daemon
	// defaults, and the client shares the daemon's pipe and /dev/shm.
	spec := inject(t, n.dir("cdi"), ids...)
	env := spec.Process.Env
	for _, want := range []string{"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M"} {
		if !slices.Contains(env, want) {
			t.Errorf("container env %v lacks %s", env, want)
		}
	}
	mounts := map[string]string{}
	for _, m := range spec.Mounts {
		mounts[m.Destination] = m.Source
	}
	for dst, src := range map[string]string{"/tmp/nvidia-mps": d.PipeDir(), "/dev/shm": d.ShmDir()} {
		if mounts[dst] != src {
			t.Errorf("container mount %s from %q, want the daemon's %s", dst, mounts[dst], src)
		}
	}
	// The daemon outlives the plugin and is found again.
	n.restart("h100x2")
	m, d = n.mps(gpu)
	if again, ok := m.PID(d); !ok || again != pid {
		t.Fatalf("after restart daemon pid %d (running %v), before %d", again, ok, pid)
	}
	n.unprepare(claim)
	if _, still := m.PID(d); still {
		t.Fatal("MPS daemon still runs after its last claim")
	}
	if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
		t.Fatal("MPS daemon directory left behind")
	}
}

func TestMemoryFractionSharesOneDaemon(t *testing.T) {
	n := newSharingNode(t, "h100x1")
	gpu := n.driver.cfg.Backend.Inventory.GPUs[0].UUID
	a := n.sharedClaim("frac-a", "gpu-0", "20Gi", "")
	b := n.sharedClaim("frac-b", "gpu-0", "30Gi", "40")
	idsA, idsB := n.mustPrepare(a), n.mustPrepare(b)
	if !slices.Contains(envOf(t, n, idsA), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M") {
		t.Errorf("claim a env: %v", envOf(t, n, idsA))
	}
	envB := envOf(t, n, idsB)
	if !slices.Contains(envB, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=30720M") || !slices.Contains(envB, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40") {
		t.Errorf("claim b env: %v", envB)
	}
	m, d := n.mps(gpu)
	if _, ok := m.PID(d); !ok {
		t.Fatal("no MPS daemon for the shared GPU")
	}
	n.unprepare(a)
	if _, ok := m.PID(d); !ok {
		t.Fatal("daemon stopped while a share is still prepared")
	}
	n.unprepare(b)
	if _, ok := m.PID(d); ok {
		t.Fatal("daemon still runs after the last share")
	}
	// Time-slicing cannot enforce a memory share.
	bad := n.sharedClaim("frac-ts", "gpu-0", "10Gi", "", `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`)
	if e := n.prepare(bad)["uid-frac-ts"].GetError(); !strings.Contains(e, "memory-fraction claims run under MPS") {
		t.Fatalf("time-slicing on a memory share: %q", e)
	}
}

func TestMigWithMPS(t *testing.T) {
	n := newMigNode(t, "a100-80gbx1:mig")
	claim := n.claim("mig-mps", []string{"gpu-0-mig-3g40gb-9-4"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"8Gi"}}}`)
	n.mustPrepare(claim)
	rec, _ := n.driver.state.Ledger.Get(claim.UID)
	migUUID := rec.Devices[0].UUID
	if !strings.HasPrefix(migUUID, "MIG-") || rec.Devices[0].Sharing.Target != migUUID {
		t.Fatalf("MPS target %q for MIG device %q", rec.Devices[0].Sharing.Target, migUUID)
	}
	m, d := n.mps(migUUID)
	if _, ok := m.PID(d); !ok {
		t.Fatal("no MPS daemon for the MIG device")
	}
	n.unprepare(claim)
	if _, ok := m.PID(d); ok {
		t.Fatal("MIG device's MPS daemon still runs")
	}
}

func TestSharingValidationPerClaim(t *testing.T) {
	n := newNode(t, "h100x2")
	tooBig := n.claim("too-big", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"100Gi"}}}`)
	pct := n.claim("pct", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":0}}}`)
	res := n.prepare(tooBig, pct)
	if e := res["uid-too-big"].GetError(); !strings.Contains(e, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: 100Gi exceeds") {
		t.Errorf("memory limit above the device: %q", e)
	}
	if e := res["uid-pct"].GetError(); !strings.Contains(e, "defaultActiveThreadPercentage: 0 is outside 1-100") {
		t.Errorf("thread percentage 0: %q", e)
	}

	// A node that offers only time-slicing refuses MPS with the fix in the message.
	delete(n.driver.state.Sharing.Allowed, "MPS")
	mps := n.claim("no-mps", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`)
	if e := n.prepare(mps)["uid-no-mps"].GetError(); !strings.Contains(e, "MPS is not enabled on node n1") || !strings.Contains(e, "--sharing-strategies") {
		t.Errorf("MPS on a node without it: %q", e)
	}
}

func TestDeadMPSDaemonIsRestarted(t *testing.T) {
	n := newNode(t, "h100x1")
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop) // before the node's state dir goes
	go n.driver.state.SuperviseSharing(ctx, 20*time.Millisecond)
	claim := n.claim("mps", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`)
	n.mustPrepare(claim)
	m, d := n.mps(n.driver.cfg.Backend.Inventory.GPUs[0].UUID)
	pid, _ := m.PID(d)
	// Kill it as a container teardown would.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a new MPS daemon", func() bool {
		again, ok := m.PID(d)
		return ok && again != pid
	})
	n.unprepare(claim)
	// A supervisor pass after unprepare must not revive it.
	if err := n.driver.state.SuperviseSharingOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.PID(d); ok {
		t.Fatal("daemon runs after its claim was unprepared")
	}
}
