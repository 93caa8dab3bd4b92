// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func newSim(t *testing.T, profile string) (*simulate.Simulator, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sim")
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	return sim, dir
}

func gpu(t *testing.T, sim *simulate.Simulator, i int) (nvml.Device, string) {
	t.Helper()
	dev, ret := sim.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	uuid, _ := dev.GetUUID()
	return dev, uuid
}

func profileInfo(t *testing.T, dev nvml.Device, index int) nvml.GpuInstanceProfileInfo {
	t.Helper()
	info, ret := dev.GetGpuInstanceProfileInfo(index)
	if ret != nvml.SUCCESS {
		t.Fatalf("profile index %d: %s", index, nvml.ErrorString(ret))
	}
	return info
}

func migMode(t *testing.T, dev nvml.Device) [2]int {
	t.Helper()
	cur, pend, ret := dev.GetMigMode()
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	return [2]int{cur, pend}
}

var (
	on      = nvml.DEVICE_MIG_ENABLE
	off     = nvml.DEVICE_MIG_DISABLE
	enabled = [2]int{on, on}
	disable = [2]int{off, off}
)

// TestProfileIDsAsNVMLReports: GetGpuInstanceProfileInfo is looked up by
// the GPU_INSTANCE_PROFILE_* index and answers the profile ID of NVIDIA's
// `nvidia-smi mig -lgip` tables, which differs from the index.
func TestProfileIDsAsNVMLReports(t *testing.T) {
	eight := map[int]uint32{
		nvml.GPU_INSTANCE_PROFILE_1_SLICE: 19, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15,
		nvml.GPU_INSTANCE_PROFILE_2_SLICE: 14, nvml.GPU_INSTANCE_PROFILE_3_SLICE: 9, nvml.GPU_INSTANCE_PROFILE_4_SLICE: 5, nvml.GPU_INSTANCE_PROFILE_7_SLICE: 0,
	}
	for model, want := range map[string]map[int]uint32{
		"a100-40gb": eight, "a100-80gb": eight, "h100": eight, "h200": eight, "b200": eight, "gh200": eight,
		"a30": {
			nvml.GPU_INSTANCE_PROFILE_1_SLICE: 14, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 21, nvml.GPU_INSTANCE_PROFILE_2_SLICE: 5,
			nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1: 6, nvml.GPU_INSTANCE_PROFILE_4_SLICE: 0,
		},
	} {
		sim, _ := newSim(t, model+"x1")
		dev, _ := gpu(t, sim, 0)
		for index := 0; index < nvml.GPU_INSTANCE_PROFILE_COUNT; index++ {
			info, ret := dev.GetGpuInstanceProfileInfo(index)
			id, ok := want[index]
			if !ok {
				if ret != nvml.ERROR_NOT_SUPPORTED {
					t.Errorf("%s: index %d: %s, want NOT_SUPPORTED", model, index, nvml.ErrorString(ret))
				}
				continue
			}
			if ret != nvml.SUCCESS || info.Id != id {
				t.Errorf("%s: index %d: ID %d (%s), want %d", model, index, info.Id, nvml.ErrorString(ret), id)
			}
			// Placements are keyed by the ID, as NVML keys them.
			if pl, ret := dev.GetGpuInstancePossiblePlacements(&info); ret != nvml.SUCCESS || len(pl) == 0 {
				t.Errorf("%s: profile %d has no placements", model, id)
			}
		}
	}
	// The H100's table from NVIDIA's published -lgip output.
	sim, _ := newSim(t, "h100x1")
	dev, _ := gpu(t, sim, 0)
	for index, w := range map[int]struct {
		id       uint32
		sms, mem uint32
	}{
		nvml.GPU_INSTANCE_PROFILE_1_SLICE: {19, 16, 9984}, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: {20, 16, 9984},
		nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: {15, 26, 20096}, nvml.GPU_INSTANCE_PROFILE_2_SLICE: {14, 32, 20096},
		nvml.GPU_INSTANCE_PROFILE_3_SLICE: {9, 60, 40448}, nvml.GPU_INSTANCE_PROFILE_4_SLICE: {5, 64, 40448},
		nvml.GPU_INSTANCE_PROFILE_7_SLICE: {0, 132, 81152},
	} {
		info := profileInfo(t, dev, index)
		if info.Id != w.id || info.MultiprocessorCount != w.sms || info.MemorySizeMB != uint64(w.mem) {
			t.Errorf("H100 index %d: %+v, want ID %d, %d SMs, %d MiB", index, info, w.id, w.sms, w.mem)
		}
	}
}

// TestComputeInstanceProfileIDs: compute instance profiles of a GPU
// instance, keyed by the GPU instance's profile ID; their ID is the
// COMPUTE_INSTANCE_PROFILE_* value (-lcip: 1c.3g.20gb ID 0 ... 3g.20gb ID 2).
func TestComputeInstanceProfileIDs(t *testing.T) {
	sim, _ := newSim(t, "a100-40gbx1:mig")
	dev, _ := gpu(t, sim, 0)
	info := profileInfo(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 4, Size: 4})
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	for ci, want := range map[int][2]uint32{
		nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE: {3, 14}, nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE: {1, 28}, nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE: {1, 42},
	} {
		p, ret := gi.GetComputeInstanceProfileInfo(ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret != nvml.SUCCESS || p.Id != uint32(ci) || p.InstanceCount != want[0] || p.MultiprocessorCount != want[1] {
			t.Errorf("compute profile %d: %+v (%s), want %v", ci, p, nvml.ErrorString(ret), want)
		}
	}
	if _, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("a 4-slice compute instance in a 3g GPU instance: %s", nvml.ErrorString(ret))
	}
}

// TestGPUInstancesAsTheDriverPlacesThem: IDs follow the placement (NVIDIA's
// A100 examples: 4g.20gb at 0:4 is GPU instance 1, 2g.10gb at 4:2 is 5,
// 1g.5gb at 6:1 is 13), placements must be valid and free, and a profile
// allows no more instances than its InstanceCount.
func TestGPUInstancesAsTheDriverPlacesThem(t *testing.T) {
	sim, _ := newSim(t, "a100-40gbx1:mig")
	dev, _ := gpu(t, sim, 0)
	create := func(index int, start, size uint32) (nvml.GpuInstance, nvml.Return) {
		info := profileInfo(t, dev, index)
		return dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: size})
	}
	for _, c := range []struct {
		index       int
		start, size uint32
		id          uint32
	}{{nvml.GPU_INSTANCE_PROFILE_4_SLICE, 0, 4, 1}, {nvml.GPU_INSTANCE_PROFILE_2_SLICE, 4, 2, 5}, {nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 6, 1, 13}} {
		gi, ret := create(c.index, c.start, c.size)
		if ret != nvml.SUCCESS {
			t.Fatalf("create %+v: %s", c, nvml.ErrorString(ret))
		}
		info, _ := gi.GetInfo()
		if info.Id != c.id {
			t.Errorf("GPU instance at %d:%d has ID %d, want %d", c.start, c.size, info.Id, c.id)
		}
	}
	if _, ret := create(nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2, 1); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("overlapping placement: %s", nvml.ErrorString(ret))
	}
	if _, ret := create(nvml.GPU_INSTANCE_PROFILE_3_SLICE, 2, 4); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("invalid placement: %s", nvml.ErrorString(ret))
	}
	// 1g.5gb+me allows one instance, and one exists at slot 6.
	if _, ret := create(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 7, 1); ret != nvml.ERROR_INVALID_ARGUMENT {
		t.Errorf("1g at slot 7: %s", nvml.ErrorString(ret))
	}
	if _, ret := create(nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 3, 1); ret != nvml.ERROR_INSUFFICIENT_RESOURCES {
		t.Errorf("a second 1g.5gb+me: %s", nvml.ErrorString(ret))
	}
}

// TestSetMigModeReturnsActivationAndStatus: go-nvml returns
// (activationStatus, return); the two differ, and a failed call leaves the
// activation status at SUCCESS.
func TestSetMigModeReturnsActivationAndStatus(t *testing.T) {
	sim, _ := newSim(t, "h100x1")
	dev, uuid := gpu(t, sim, 0)
	if err := sim.SetUnprivileged(true); err != nil {
		t.Fatal(err)
	}
	if activation, ret := dev.SetMigMode(on); activation != nvml.SUCCESS || ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("unprivileged: (%s, %s), want (SUCCESS, NO_PERMISSION)", nvml.ErrorString(activation), nvml.ErrorString(ret))
	}
	_ = sim.SetUnprivileged(false)
	_ = sim.SetInUse(uuid, true)
	if activation, ret := dev.SetMigMode(on); activation != nvml.ERROR_IN_USE || ret != nvml.SUCCESS {
		t.Errorf("in use: (%s, %s), want (IN_USE, SUCCESS)", nvml.ErrorString(activation), nvml.ErrorString(ret))
	}
	if got := migMode(t, dev); got != [2]int{off, on} {
		t.Errorf("in use: MIG mode (current, pending) %v, want the enable pending", got)
	}
}

// TestAmpereMigModePendingUntilReset: an A100 accepts a MIG mode change but
// it only takes effect at a GPU reset, which the simulator never does by
// itself, not even across a restart.
func TestAmpereMigModePendingUntilReset(t *testing.T) {
	sim, dir := newSim(t, "a100-80gbx1")
	dev, uuid := gpu(t, sim, 0)
	activation, ret := dev.SetMigMode(on)
	if ret != nvml.SUCCESS || activation != nvml.ERROR_RESET_REQUIRED {
		t.Fatalf("SetMigMode: (%s, %s), want (RESET_REQUIRED, SUCCESS)", nvml.ErrorString(activation), nvml.ErrorString(ret))
	}
	if got := migMode(t, dev); got != [2]int{off, on} {
		t.Fatalf("MIG mode %v, want enable pending", got)
	}
	info := profileInfo(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 0, Size: 1}); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("GPU instance while MIG mode is pending: %s", nvml.ErrorString(ret))
	}
	time.Sleep(10 * time.Millisecond)
	again, err := simulate.New(sim.Profile, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ = gpu(t, again, 0)
	if got := migMode(t, dev); got != [2]int{off, on} {
		t.Fatalf("after a restart MIG mode %v, want still pending", got)
	}
	_ = again.SetInUse(uuid, true)
	if err := again.ResetGPU(uuid); err == nil {
		t.Fatal("a GPU another client holds was reset")
	}
	_ = again.SetInUse(uuid, false)
	if err := again.ResetGPU(uuid); err != nil {
		t.Fatal(err)
	}
	if got := migMode(t, dev); got != enabled {
		t.Fatalf("after reset MIG mode %v", got)
	}
}

// TestHopperMigModeWithoutReset: H100, H200 and B200 change MIG mode at
// once, unless another client holds the GPU.
func TestHopperMigModeWithoutReset(t *testing.T) {
	for _, model := range []string{"h100", "h200", "b200"} {
		sim, _ := newSim(t, model+"x1")
		dev, uuid := gpu(t, sim, 0)
		if a, r := dev.SetMigMode(on); a != nvml.SUCCESS || r != nvml.SUCCESS || migMode(t, dev) != enabled {
			t.Fatalf("%s: enable (%s, %s), mode %v", model, nvml.ErrorString(a), nvml.ErrorString(r), migMode(t, dev))
		}
		_ = sim.SetInUse(uuid, true)
		if a, r := dev.SetMigMode(off); a != nvml.ERROR_IN_USE || r != nvml.SUCCESS || migMode(t, dev) != [2]int{on, off} {
			t.Fatalf("%s: disable while in use (%s, %s), mode %v", model, nvml.ErrorString(a), nvml.ErrorString(r), migMode(t, dev))
		}
		_ = sim.SetInUse(uuid, false)
		if a, r := dev.SetMigMode(off); a != nvml.SUCCESS || r != nvml.SUCCESS || migMode(t, dev) != disable {
			t.Fatalf("%s: disable (%s, %s), mode %v", model, nvml.ErrorString(a), nvml.ErrorString(r), migMode(t, dev))
		}
	}
}

// TestNoPermission: without privileges MIG changes fail, queries work.
func TestNoPermission(t *testing.T) {
	sim, _ := newSim(t, "h100x1:mig")
	dev, _ := gpu(t, sim, 0)
	info := profileInfo(t, dev, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 0, Size: 1})
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	_ = sim.SetUnprivileged(true)
	if _, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 1, Size: 1}); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("create GPU instance: %s", nvml.ErrorString(ret))
	}
	ciInfo, _ := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("create compute instance: %s", nvml.ErrorString(ret))
	}
	if ret := gi.Destroy(); ret != nvml.ERROR_NO_PERMISSION {
		t.Errorf("destroy GPU instance: %s", nvml.ErrorString(ret))
	}
	if _, r := dev.SetMigMode(off); r != nvml.ERROR_NO_PERMISSION {
		t.Errorf("set MIG mode: %s", nvml.ErrorString(r))
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Errorf("a query failed without privileges: %s", nvml.ErrorString(ret))
	}
}

// TestAttributesAndSMs: device attributes only on MIG device handles, the
// CUDA core count (SMs x cores per SM) only outside MIG mode, as NVML does.
func TestAttributesAndSMs(t *testing.T) {
	for model, want := range map[string][2]int{"a100-40gb": {108, 64}, "a100-80gb": {108, 64}, "a30": {56, 64}, "h100": {132, 128}, "h200": {132, 128}, "b200": {148, 128}, "gh200": {132, 128}} {
		sim, _ := newSim(t, model+"x1")
		dev, uuid := gpu(t, sim, 0)
		if _, ret := dev.GetAttributes(); ret != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("%s: GetAttributes on a GPU handle: %s", model, nvml.ErrorString(ret))
		}
		if cores, ret := dev.GetNumGpuCores(); ret != nvml.SUCCESS || cores != want[0]*want[1] || sim.SMs() != want[0] {
			t.Errorf("%s: %d cores (%s), %d SMs; want %d SMs", model, cores, nvml.ErrorString(ret), sim.SMs(), want[0])
		}
		if err := sim.SetMigModeAsAdmin(uuid, on); err != nil {
			t.Fatal(err)
		}
		if _, ret := dev.GetNumGpuCores(); ret != nvml.ERROR_NOT_SUPPORTED {
			t.Errorf("%s: core count in MIG mode: %s", model, nvml.ErrorString(ret))
		}
	}
	sim, _ := newSim(t, "a100-40gbx1:mig")
	dev, _ := gpu(t, sim, 0)
	mig := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 0, 4)
	attrs, ret := mig.GetAttributes()
	want := nvml.DeviceAttributes{MultiprocessorCount: 42, SharedCopyEngineCount: 3, SharedDecoderCount: 2, GpuInstanceSliceCount: 3, ComputeInstanceSliceCount: 3, MemorySizeMB: 19968}
	if ret != nvml.SUCCESS || attrs != want {
		t.Errorf("3g.20gb attributes %+v (%s), want %+v", attrs, nvml.ErrorString(ret), want)
	}
	if name, _ := mig.GetName(); name != "NVIDIA A100-SXM4-40GB MIG 3g.20gb" {
		t.Errorf("MIG device name %q", name)
	}
}

func createMigDevice(t *testing.T, dev nvml.Device, index int, start, size uint32) nvml.Device {
	t.Helper()
	info := profileInfo(t, dev, index)
	gi, ret := dev.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: start, Size: size})
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(int(info.SliceCount)-1, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if info.SliceCount == 7 {
		ciInfo, ret = gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	}
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	giInfo, _ := gi.GetInfo()
	n, _ := dev.GetMaxMigDeviceCount()
	for i := 0; i < n; i++ {
		h, ret := dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if id, _ := h.GetGpuInstanceId(); id == int(giInfo.Id) {
			return h
		}
	}
	t.Fatal("no handle for the new MIG device")
	return nil
}

// TestFaultPerGPU: a fault injected on one GPU fails its queries (but not
// those naming it) and leaves the other GPUs alone.
func TestFaultPerGPU(t *testing.T) {
	sim, _ := newSim(t, "h100x2")
	dev0, uuid0 := gpu(t, sim, 0)
	dev1, _ := gpu(t, sim, 1)
	if err := sim.SetFault(uuid0, nvml.ERROR_UNKNOWN); err != nil {
		t.Fatal(err)
	}
	if _, ret := dev0.GetMemoryInfo(); ret != nvml.ERROR_UNKNOWN {
		t.Errorf("faulted GPU: %s", nvml.ErrorString(ret))
	}
	if _, _, ret := dev0.GetMigMode(); ret != nvml.ERROR_UNKNOWN {
		t.Errorf("faulted GPU MIG mode: %s", nvml.ErrorString(ret))
	}
	if u, ret := dev0.GetUUID(); ret != nvml.SUCCESS || u != uuid0 {
		t.Errorf("faulted GPU UUID: %s", nvml.ErrorString(ret))
	}
	if _, ret := dev1.GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Errorf("healthy GPU: %s", nvml.ErrorString(ret))
	}
	_ = sim.SetFault(uuid0, nvml.SUCCESS)
	_ = sim.SetLost(uuid0, true)
	if _, ret := dev0.GetPciInfo(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("lost GPU: %s", nvml.ErrorString(ret))
	}
}

// TestCapabilitiesTree: the procfs files the driver keeps for MIG
// instances exist exactly while the instances do, with the driver's format
// and minors, and survive a restart.
func TestCapabilitiesTree(t *testing.T) {
	sim, dir := newSim(t, "h100x2:mig")
	dev, _ := gpu(t, sim, 1)
	mig := createMigDevice(t, dev, nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 2) // GPU instance 4
	gi, _ := mig.GetGpuInstanceId()
	ci, _ := mig.GetComputeInstanceId()
	if gi != 4 || ci != 0 {
		t.Fatalf("GPU instance %d, compute instance %d", gi, ci)
	}
	read := func(p string) string {
		data, err := os.ReadFile(p)
		if err != nil {
			return ""
		}
		return string(data)
	}
	proc := sim.ProcRoot()
	giFile := filepath.Join(proc, "driver/nvidia/capabilities/gpu1/mig/gi4/access")
	ciFile := filepath.Join(proc, "driver/nvidia/capabilities/gpu1/mig/gi4/ci0/access")
	// gpu1: 3 + 135; gi4: + 36; ci0: + 1.
	if got := read(giFile); got != "DeviceFileMinor: 174\nDeviceFileMode: 292\nDeviceFileModify: 1\n" {
		t.Errorf("GPU instance capability %q", got)
	}
	if got := read(ciFile); got != "DeviceFileMinor: 175\nDeviceFileMode: 292\nDeviceFileModify: 1\n" {
		t.Errorf("compute instance capability %q", got)
	}
	if got := read(filepath.Join(proc, "driver/nvidia/capabilities/mig/config")); got != "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n" {
		t.Errorf("mig/config %q", got)
	}
	if minors := read(filepath.Join(proc, "driver/nvidia-caps/mig-minors")); !strings.Contains(minors, "gpu1/gi4/access 174\ngpu1/gi4/ci0/access 175\n") {
		t.Error("mig-minors does not list gpu1/gi4")
	}
	if !strings.Contains(read(filepath.Join(proc, "devices")), "237 nvidia-caps\n") {
		t.Error("/proc/devices has no nvidia-caps major")
	}
	if _, err := os.Stat(filepath.Join(dir, "proc", "driver/nvidia/capabilities/gpu0/mig/gi4")); err == nil {
		t.Error("GPU 0 has a capability for an instance of GPU 1")
	}
	// A restarted simulator finds the instance and its files.
	_ = os.Remove(ciFile)
	again, err := simulate.New(sim.Profile, "n1", dir)
	if err != nil {
		t.Fatal(err)
	}
	if read(ciFile) == "" {
		t.Fatal("compute instance capability not restored")
	}
	dev, _ = gpu(t, again, 1)
	g, _ := dev.GetGpuInstanceById(4)
	c, _ := g.GetComputeInstanceById(0)
	if c.Destroy() != nvml.SUCCESS || read(ciFile) != "" || read(giFile) == "" {
		t.Error("destroying the compute instance must remove only its capability")
	}
	if g.Destroy() != nvml.SUCCESS || read(giFile) != "" {
		t.Error("destroying the GPU instance must remove its capability")
	}
}

// TestEventSet: XID and ECC events reach the event sets registered for
// them, and only those.
func TestEventSet(t *testing.T) {
	sim, _ := newSim(t, "h100x2")
	dev0, uuid0 := gpu(t, sim, 0)
	dev1, uuid1 := gpu(t, sim, 1)
	if types, ret := dev0.GetSupportedEventTypes(); ret != nvml.SUCCESS || types&nvml.EventTypeXidCriticalError == 0 || types&nvml.EventTypeDoubleBitEccError == 0 {
		t.Fatalf("supported events %x (%s)", types, nvml.ErrorString(ret))
	}
	set, ret := sim.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if ret := dev0.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if ret := sim.DeviceRegisterEvents(dev1, nvml.EventTypeDoubleBitEccError, set); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if _, ret := set.Wait(10); ret != nvml.ERROR_TIMEOUT {
		t.Fatalf("empty set: %s", nvml.ErrorString(ret))
	}
	if n := sim.InjectXid(uuid1, simulate.XidFallenOffTheBus); n != 0 {
		t.Error("GPU 1's XID reached a set registered only for its ECC errors")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		sim.InjectXid(uuid0, simulate.XidDoubleBitECC)
	}()
	e, ret := sim.EventSetWait(set, 5000)
	if ret != nvml.SUCCESS || e.Device != dev0 || e.EventType != nvml.EventTypeXidCriticalError || e.EventData != simulate.XidDoubleBitECC || e.GpuInstanceId != simulate.NoInstance {
		t.Fatalf("event %+v (%s)", e, nvml.ErrorString(ret))
	}
	sim.InjectEvent(uuid1, nvml.EventTypeDoubleBitEccError, 0, 3, 0)
	if e, ret := set.Wait(100); ret != nvml.SUCCESS || e.Device != dev1 || e.EventType != nvml.EventTypeDoubleBitEccError || e.GpuInstanceId != 3 {
		t.Fatalf("ECC event %+v (%s)", e, nvml.ErrorString(ret))
	}
	if set.Free() != nvml.SUCCESS {
		t.Fatal("free")
	}
	if sim.InjectXid(uuid0, simulate.XidDoubleBitECC) != 0 {
		t.Error("a freed set received an event")
	}
}

// TestEveryModelStarts: every model the README lists, with MIG mode off
// and on, publishes valid slices with the profile names NVIDIA uses.
func TestEveryModelStarts(t *testing.T) {
	names := map[string][]string{
		"a100-40gb": {"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"},
		"a100-80gb": {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"a30":       {"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"},
		"h100":      {"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"},
		"h200":      {"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"},
		"b200":      {"1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"},
		"gh200":     {"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"},
	}
	if got := simulate.ModelNames(); len(got) != len(names) {
		t.Fatalf("models %v", got)
	}
	for _, model := range simulate.ModelNames() {
		for _, suffix := range []string{"", simulate.MigSuffix} {
			_, inv, err := simulate.Discover(model+"x2"+suffix, "n1", t.TempDir())
			if err != nil {
				t.Fatalf("%s%s: %v", model, suffix, err)
			}
			var got []string
			for _, p := range inv.GPUs[0].MigProfiles {
				got = append(got, p.Name)
			}
			slices.Sort(got)
			want := slices.Clone(names[model])
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: profiles %v, want %v", model, got, want)
			}
			for _, dynamic := range []bool{false, true} {
				res := resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: dynamic})
				if err := resourceslices.Validate(res); err != nil {
					t.Errorf("%s%s dynamic MIG %v: %v", model, suffix, dynamic, err)
				}
				if len(resourceslices.Objects("gpu.nvidia.com", "n1", res)) == 0 {
					t.Errorf("%s%s: no slices", model, suffix)
				}
			}
		}
	}
}
