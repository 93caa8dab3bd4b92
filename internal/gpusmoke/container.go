// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// gpudra smoke container: the path a pod takes to its GPU, without a
// cluster. One whole GPU is prepared through the in-process plugin; its CDI
// devices are applied to an OCI runtime spec by the CDI library and runc
// runs kernelprobe (test/gpusmoke/probe) in that container.

package gpusmoke

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/ocirun"
)

type containerOptions struct {
	smokeOptions
	runc, rootfs string
}

func newSmokeContainerCommand() *cobra.Command {
	o := containerOptions{}
	cmd := &cobra.Command{
		Use:   "container",
		Short: "Run a CUDA probe in containers made from a prepared GPU's CDI spec, whole and under MPS (runc, no container runtime); changes no GPU setting",
		Long: `Prepares one whole GPU as "smoke prepare" does, applies the claim's CDI
devices to an OCI runtime spec with the CDI library (device nodes and their
cgroup rules, driver library mounts, nvidia-cdi-hook hooks) over --rootfs and
runs kernelprobe in it with --runc. The container must see only the claimed
GPU's device node (and the control nodes), load libcuda by soname through the
ld cache the hook wrote, and get cuInit 0, the claim's GPU UUID from
cuDeviceGetUuid and a checked PTX kernel result; on simulated GPUs cuInit must
give 100 (no device) and the rest is skipped.

Then, where the driver root has nvidia-cuda-mps-control, it prepares an MPS
claim of the same GPU (GpuConfig sharing MPS, a 2Gi pinned memory limit): the
plugin starts the GPU's MPS control daemon as its daemon pods do (chrooted
into --driver-root, in a mount namespace of its own, with the daemon's
directories where a pod has them), and two containers run kernelprobe at the
same time with the claim's CDI devices. Each must see the daemon's socket in
the pipe directory and the claim's limit in its environment, and on a GPU get
cuInit 0, allocate 1 GiB and be refused 3 GiB; on simulated GPUs cuInit must
give 805 (the daemon cannot start a server without a GPU). Unprepared, the
daemon must have got quit and left no process. hack/smoke-container.sh builds
runc and the rootfs. Needs root.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := &report{out: cmd.OutOrStdout()}
			smokeContainer(cmd.Context(), r, o)
			return r.err()
		},
	}
	f := cmd.Flags()
	// A minute more than smoke prepare: after the same prepare it runs
	// three containers and starts and stops an MPS daemon.
	o.addFlags(f, 3*time.Minute,
		"Testing only: simulated NVML (e.g. h100x2) with the real driver backend under --driver-root; the device nodes there have no GPU behind them.")
	f.StringVar(&o.runc, "runc", "", "runc binary (hack/smoke-container.sh builds one).")
	f.StringVar(&o.rootfs, "rootfs", "", "Container root filesystem with /bin/kernelprobe (hack/smoke-container.sh).")
	return cmd
}

func smokeContainer(ctx context.Context, r *report, o containerOptions) {
	r.prefix = "container: "
	if o.runc == "" || o.rootfs == "" {
		r.fail("setup", "--runc and --rootfs are required (hack/smoke-container.sh prints both)")
		return
	}
	if _, err := os.Stat(filepath.Join(o.rootfs, "bin", "kernelprobe")); err != nil {
		r.fail("setup", "--rootfs %s has no /bin/kernelprobe: %v (hack/smoke-container.sh builds it)", o.rootfs, err)
		return
	}
	// The MPS part needs NVIDIA's control daemon in the driver root; its
	// daemon runs as a daemon pod would, on the host (hostMPSRunner).
	var runner *hostMPSRunner
	haveMPS, noMPS := mpsTools(o.driverRoot)
	if haveMPS {
		logs, err := os.MkdirTemp("", "gpu-smoke-mps-logs-")
		if err != nil {
			r.fail("setup", "%v", err)
			return
		}
		defer os.RemoveAll(logs)
		if runner, err = newHostMPSRunner(o.driverRoot, logs); err != nil {
			r.fail("setup", "%v", err)
			return
		}
		o.mpsRunner = runner
	}
	s, ok := openSmoke(ctx, r, o.smokeOptions)
	if !ok {
		return
	}
	defer s.close()
	claim := smokeClaim(s.dev)
	uuid := attrString(*s.dev, "uuid")
	resp, err := s.n.Prepare(s.ctx, claim)
	if err != nil {
		r.fail("prepare", "%v", err)
	} else {
		ids, metadata := cdiIDs(resp)
		r.pass("prepare", "CDI devices %v", ids)
		runProbe(s.ctx, r, s, o, append(ids, metadata...), uuid)
	}
	s.unprepareClaim(r, "unprepare", claim)
	if haveMPS {
		smokeMPS(r, s, o, runner)
	} else {
		r.skip("MPS clients", "%s", noMPS)
	}
	s.checkUnchanged(r)
}

// runProbe runs kernelprobe in a container with the claim's CDI devices
// (the device's and the metadata file's, as the kubelet hands both to the
// runtime) and checks what it saw.
func runProbe(ctx context.Context, r *report, s *smokeSession, o containerOptions, ids []string, uuid string) {
	node, err := gpuDeviceNode(s.lib, uuid)
	if err != nil {
		r.fail("setup", "%v", err)
		return
	}
	work, err := os.MkdirTemp("", "gpu-smoke-container-")
	if err != nil {
		r.fail("setup", "%v", err)
		return
	}
	defer os.RemoveAll(work)
	c := ocirun.Container{Runc: o.runc, Rootfs: o.rootfs, CDIDirs: []string{s.n.CDIDir()}, Devices: ids, Args: []string{"/bin/kernelprobe"}}
	start := time.Now()
	res, err := c.Run(ctx, work)
	if err != nil {
		r.fail("runc run", "%v; probe output: %s", err, strings.TrimSpace(res.Stdout))
		return
	}
	r.pass("runc run", "runc %s, %d CDI devices applied, %d hooks, %.1fs", o.runc, len(ids), hookCount(res), time.Since(start).Seconds())
	want := probeWant{nodes: map[string]string{}, gpuNode: node, uuid: uuid, realGPU: o.simulate == ""}
	for _, d := range res.Spec.Linux.Devices {
		if strings.HasPrefix(d.Path, "/dev/nvidia") {
			want.nodes[d.Path] = fmt.Sprintf("%d:%d", d.Major, d.Minor)
		}
	}
	checkProbe(r, res.Stdout, want)
}

// gpuDeviceNode is the GPU's device node, /dev/nvidia<minor>, as nvcdi
// names it (nvidia-container-toolkit v1.20.1,
// internal/platform-support/dgpu/nvml.go, from NVML's minor number).
func gpuDeviceNode(lib nvml.Interface, uuid string) (string, error) {
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("NVML handle of %s: %v", uuid, ret)
	}
	minor, ret := dev.GetMinorNumber()
	if ret != nvml.SUCCESS {
		return "", fmt.Errorf("NVML minor number of %s: %v", uuid, ret)
	}
	return fmt.Sprintf("/dev/nvidia%d", minor), nil
}

func hookCount(res ocirun.Result) int {
	if res.Spec == nil || res.Spec.Hooks == nil {
		return 0
	}
	h := res.Spec.Hooks
	// A CDI spec may still name the deprecated prestart hook: counted too.
	//lint:ignore SA1019 counted, not used
	return len(h.Prestart) + len(h.CreateRuntime) + len(h.CreateContainer) + len(h.StartContainer) + len(h.Poststart) + len(h.Poststop)
}
