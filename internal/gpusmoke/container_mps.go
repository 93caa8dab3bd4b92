// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// The container step's MPS claim: two containers at once as clients of
// the claim's MPS control daemon, each under the claim's pinned-memory
// limit.

package gpusmoke

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/ocirun"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// The MPS claim's pinned device memory limit, and what each client
// allocates under and over it. 1 GiB under a 2 GiB limit is what step 3
// of make gpu-smoke allocated on a real H100 (with room for the
// context's own allocations); 3 GiB is well over.
const (
	mpsLimitMiB = 2048
	mpsUnderMiB = 1024
	mpsOverMiB  = 3072
	mpsClients  = 2
)

// mpsClientsCuInitNoGPU is what cuInit gives an MPS client of R535
// (535.261.03) when no GPU is behind the device nodes, found by running
// it: 805 CUDA_ERROR_MPS_CONNECTION_FAILED, not the 100 a client without
// MPS gets. With CUDA_MPS_PIPE_DIRECTORY set, libcuda connects to the
// control daemon, which starts an nvidia-cuda-mps-server for the client's
// user; the server's own driver initialization fails ("no CUDA-capable
// device is detected", in the daemon's log), the daemon tries again a few
// times, gives up ("Server encountered a fatal exception") and the
// client's cuInit reports that it could not connect to an MPS server.
// The client got as far as the daemon; only the GPU is missing.
const mpsClientsCuInitNoGPU = 805

// smokeMPSClaim is an allocated claim for the whole GPU dev with a
// GpuConfig asking for MPS with the pinned memory limit, as a user writes
// it; the allocator copies the claim's config into the allocation.
func smokeMPSClaim(dev *resourceapi.Device) *resourceapi.ResourceClaim {
	claim := smokeClaim(dev)
	claim.Name, claim.UID = "gpu-smoke-mps", types.UID("6a1b0c8e-5302-4d5e-9f3a-0000000000a2")
	params := fmt.Sprintf(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"%dMi"}}}`, mpsLimitMiB)
	cfg := resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(params)}}}
	claim.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: cfg}}
	claim.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"}, DeviceConfiguration: cfg}}
	return claim
}

// mpsTools reports whether the driver root has NVIDIA's MPS control
// daemon, which the MPS part needs; why not, when it has not.
func mpsTools(driverRoot string) (bool, string) {
	if _, err := (sharing.NvidiaTools{Root: driverRoot}).Tool(context.Background(), "nvidia-cuda-mps-control", nil); err != nil {
		return false, fmt.Sprintf("no nvidia-cuda-mps-control in the driver root %s (the MPS part runs NVIDIA's control daemon: Debian ships it in nvidia-cuda-mps, Ubuntu in nvidia-compute-utils-<branch>, NVIDIA's .run installer with the driver)", driverRoot)
	}
	return true, ""
}

// smokeMPS prepares the MPS claim (the plugin starts its daemon through
// runner), runs mpsClients containers at once with the probe allocating
// under and over the limit, and unprepares it (the daemon gets `quit`).
func smokeMPS(r *report, s *smokeSession, o containerOptions, runner *hostMPSRunner) {
	start := time.Now()
	claim := smokeMPSClaim(s.dev)
	uuid := attrString(*s.dev, "uuid")
	resp, err := s.n.Prepare(s.ctx, claim)
	if err != nil {
		r.fail("MPS prepare", "%v", err)
		s.unprepareClaim(r, "MPS unprepare", claim)
		return
	}
	ids, metadata := cdiIDs(resp)
	r.pass("MPS prepare", "CDI devices %v; GpuConfig sharing MPS, defaultPinnedDeviceMemoryLimit %dMi", ids, mpsLimitMiB)
	// The plugin's daemon handle, as its sharing config names it
	// (pkg/driver, sharingConfig): for the daemon's directory and pid file.
	mps := &sharing.MPS{Root: filepath.Join(s.n.StateDir(), "mps"), Runner: runner}
	d := mps.Daemon(uuid)
	// The control pipe, which prepare waited for, may come a moment
	// before DaemonProgram has written the pid file.
	pid, running := mps.PID(d)
	for deadline := time.Now().Add(2 * time.Second); !running && time.Now().Before(deadline); pid, running = mps.PID(d) {
		time.Sleep(20 * time.Millisecond)
	}
	r.check(running, "MPS daemon started", "nvidia-cuda-mps-control pid %d, chrooted into %s in a mount namespace of its own (the daemon's directory at its /tmp, its shm at /dev/shm, as in a daemon pod), control pipe %s; compute mode untouched",
		pid, o.driverRoot, d.ControlPipe())

	runMPSClients(s.ctx, r, o, s.n.CDIDir(), append(ids, metadata...), uuid)
	log, _ := os.ReadFile(runner.LogFile(uuid))
	clients := strings.Count(string(log), "NEW CLIENT")
	r.check(clients >= mpsClients, "MPS clients reached the daemon", "the control daemon's log has %d NEW CLIENT lines, want %d or more (one per container)", clients, mpsClients)

	s.unprepareClaim(r, "MPS unprepare", claim)
	_, statErr := os.Stat(d.Dir)
	r.check(os.IsNotExist(statErr), "MPS daemon directory removed", "%s: %v", d.Dir, statErr)
	ok, detail := runner.stopReport(uuid)
	r.check(ok, "MPS daemon stopped with quit", "%s; the MPS part took %.1fs", detail, time.Since(start).Seconds())
}

// mpsRun is one client container's run.
type mpsRun struct {
	res        ocirun.Result
	err        error
	start, end time.Duration
}

// runMPSClients runs the clients at the same time and checks each.
func runMPSClients(ctx context.Context, r *report, o containerOptions, cdiDir string, ids []string, uuid string) {
	work, err := os.MkdirTemp("", "gpu-smoke-mps-")
	if err != nil {
		r.fail("MPS clients", "%v", err)
		return
	}
	defer os.RemoveAll(work)
	alloc := fmt.Sprintf("%d,%d", mpsUnderMiB, mpsOverMiB)
	c := ocirun.Container{Runc: o.runc, Rootfs: o.rootfs, CDIDirs: []string{cdiDir}, Devices: ids, Args: []string{"/bin/kernelprobe", "--alloc", alloc}}
	runs := make([]mpsRun, mpsClients)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i].start = time.Since(begin)
			runs[i].res, runs[i].err = c.Run(ctx, filepath.Join(work, strconv.Itoa(i)))
			runs[i].end = time.Since(begin)
		}()
	}
	wg.Wait()
	for i, run := range runs {
		checkMPSClient(r, fmt.Sprintf("MPS client %d: ", i+1), run, o.simulate == "", uuid)
	}
}

// checkMPSClient reports the checks of one client container; uuid is the
// claim's GPU.
func checkMPSClient(r *report, name string, run mpsRun, realGPU bool, uuid string) {
	if run.err != nil {
		r.fail(name+"runc run", "%v; probe output: %s", run.err, strings.TrimSpace(run.res.Stdout))
		return
	}
	r.pass(name+"runc run", "from %.1fs to %.1fs, %d hooks", run.start.Seconds(), run.end.Seconds(), hookCount(run.res))
	p := parseProbe(run.res.Stdout)
	if !p.done {
		r.fail(name+"probe ran", "no \"done\" line: %s", lastLine(run.res.Stdout))
		return
	}
	wantLimit := fmt.Sprintf("0=%dM", mpsLimitMiB)
	r.check(p.mps == sharing.ContainerPipeDir && p.mpsControl == "socket" && p.mpsLimit == wantLimit, name+"pipe directory and limit",
		"CUDA_MPS_PIPE_DIRECTORY %s (control: %s), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT %s; want %s with the daemon's socket and the claim's %s",
		p.mps, p.mpsControl, p.mpsLimit, sharing.ContainerPipeDir, wantLimit)
	r.check(p.ldcache != "" && p.ldcache != "none" && p.lib == p.ldcache, name+"libcuda via the hook's ld cache",
		"ld.so.cache names %s; dlopen(\"libcuda.so.1\") loaded %s", p.ldcache, p.lib)
	wantInit, why := mpsClientsCuInitNoGPU, "an MPS client without a GPU: the daemon's server cannot start"
	if realGPU {
		wantInit, why = 0, "a real GPU, through the MPS server"
	}
	r.check(p.cuInit == wantInit, name+"cuInit", "cuInit %d %s, want %d (%s)", p.cuInit, p.initName, wantInit, why)
	if !realGPU {
		r.skip(name+"allocations under and over the limit", "skipped: no GPU (cuInit %d)", p.cuInit)
		return
	}
	r.check(p.count == 1 && len(p.uuids) == 1 && p.uuids[0] == uuid, name+"GPU UUID",
		"cuDeviceGetCount %d, cuDeviceGetUuid %v, want only the claim's %s", p.count, p.uuids, uuid)
	r.check(strings.HasPrefix(p.kernel, "PASS"), name+"CUDA kernel", "PTX JIT-compiled by the driver, run through the MPS server: %s", orNone(p.kernel))
	under, over := p.alloc(mpsUnderMiB), p.alloc(mpsOverMiB)
	r.check(under.rc == 0, fmt.Sprintf("%s%d MiB under the %d MiB limit", name, mpsUnderMiB, mpsLimitMiB), "cuMemAlloc %s", under)
	r.check(over.rc > 0, fmt.Sprintf("%s%d MiB over the %d MiB limit refused", name, mpsOverMiB, mpsLimitMiB), "cuMemAlloc %s", over)
}

// allocResult is one of the probe's "alloc MIB RC NAME" lines; rc -1
// when the probe printed none for the size.
type allocResult struct {
	rc   int
	name string
}

func (a allocResult) String() string {
	if a.rc < 0 {
		return "not run"
	}
	return fmt.Sprintf("%d %s", a.rc, a.name)
}

func (p probeOutput) alloc(mib int) allocResult {
	i := slices.IndexFunc(p.allocs, func(a string) bool { return strings.HasPrefix(a, strconv.Itoa(mib)+" ") })
	if i < 0 {
		return allocResult{rc: -1}
	}
	f := strings.Fields(p.allocs[i])
	res := allocResult{rc: -1}
	if len(f) >= 2 {
		if rc, err := strconv.Atoi(f[1]); err == nil {
			res.rc = rc
		}
	}
	if len(f) >= 3 {
		res.name = f[2]
	}
	return res
}
