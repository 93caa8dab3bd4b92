// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package gpusmoke

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/ocirun"
)

// mpsClientOnGPU is kernelprobe's output in an MPS client container on a
// GPU where everything works, in the shape the probe prints.
const mpsClientOnGPU = `dev /dev/nvidiactl 195:255
dev /dev/nvidia3 195:3
ldcache libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1
lib libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03
cuDriverGetVersion 0 12020
cuInit 0 CUDA_SUCCESS
devices 0 1
uuid 0 ` + probeUUID + `
ctx 0 CUDA_SUCCESS
module 0 CUDA_SUCCESS
kernel PASS 4096
alloc 1024 0 CUDA_SUCCESS
alloc 3072 2 CUDA_ERROR_OUT_OF_MEMORY
mps /tmp/nvidia-mps
mpscontrol socket
mpslimit 0=2048M
done
`

func TestCheckMPSClient(t *testing.T) {
	// noGPU cuts the output after cuInit, as the probe stops there.
	noGPU := func(rc string) func(string) string {
		return func(out string) string {
			i := strings.Index(out, "cuInit")
			return out[:i] + "cuInit " + rc + "\nmps /tmp/nvidia-mps\nmpscontrol socket\nmpslimit 0=2048M\ndone\n"
		}
	}
	replace := func(old, new string) func(string) string {
		return func(out string) string { return strings.Replace(out, old, new, 1) }
	}
	for _, tc := range []struct {
		name    string
		edit    func(string) string
		noGPU   bool
		runErr  error
		failed  []string
		skipped []string
	}{
		{name: "all good"},
		{name: "the allocation under the limit refused", edit: replace("alloc 1024 0 CUDA_SUCCESS", "alloc 1024 2 CUDA_ERROR_OUT_OF_MEMORY"),
			failed: []string{"c: 1024 MiB under the 2048 MiB limit"}},
		{name: "the allocation over the limit granted", edit: replace("alloc 3072 2 CUDA_ERROR_OUT_OF_MEMORY", "alloc 3072 0 CUDA_SUCCESS"),
			failed: []string{"c: 3072 MiB over the 2048 MiB limit refused"}},
		{name: "no allocation made", edit: replace("alloc 1024 0 CUDA_SUCCESS\nalloc 3072 2 CUDA_ERROR_OUT_OF_MEMORY\n", ""),
			failed: []string{"c: 1024 MiB under the 2048 MiB limit", "c: 3072 MiB over the 2048 MiB limit refused"}},
		{name: "another limit", edit: replace("mpslimit 0=2048M", "mpslimit 0=4096M"), failed: []string{"c: pipe directory and limit"}},
		{name: "no limit", edit: replace("mpslimit 0=2048M", "mpslimit none"), failed: []string{"c: pipe directory and limit"}},
		{name: "no daemon socket", edit: replace("mpscontrol socket", "mpscontrol missing"), failed: []string{"c: pipe directory and limit"}},
		{name: "no pipe directory", edit: replace("mps /tmp/nvidia-mps\nmpscontrol socket\n", "mps none\n"), failed: []string{"c: pipe directory and limit"}},
		{name: "libcuda not through the ld cache", edit: replace("ldcache libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1", "ldcache libcuda.so.1 none"),
			failed: []string{"c: libcuda via the hook's ld cache"}},
		{name: "another GPU's UUID", edit: replace(probeUUID, "GPU-00000000-0000-0000-0000-000000000000"), failed: []string{"c: GPU UUID"}},
		{name: "kernel failed", edit: replace("kernel PASS 4096", "kernel FAIL cuLaunchKernel 2 CUDA_ERROR_OUT_OF_MEMORY"), failed: []string{"c: CUDA kernel"}},
		{name: "cuInit fails on a GPU", edit: noGPU("805 CUDA_ERROR_MPS_CONNECTION_FAILED"),
			failed: []string{"c: cuInit", "c: GPU UUID", "c: CUDA kernel", "c: 1024 MiB under the 2048 MiB limit", "c: 3072 MiB over the 2048 MiB limit refused"}},
		{name: "no GPU: cuInit 805 passes, allocations skipped", edit: noGPU("805 CUDA_ERROR_MPS_CONNECTION_FAILED"), noGPU: true,
			skipped: []string{"c: allocations under and over the limit"}},
		// 100 is what a client without MPS gets: the client never asked
		// the daemon.
		{name: "no GPU: cuInit 100", edit: noGPU("100 CUDA_ERROR_NO_DEVICE"), noGPU: true,
			failed: []string{"c: cuInit"}, skipped: []string{"c: allocations under and over the limit"}},
		{name: "runc failed", runErr: errors.New("runc run: exit status 1"), failed: []string{"c: runc run"}},
		{name: "probe died", edit: replace("done\n", ""), failed: []string{"c: probe ran"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := mpsClientOnGPU
			if tc.edit != nil {
				out = tc.edit(out)
			}
			var buf bytes.Buffer
			r := &report{out: &buf}
			checkMPSClient(r, "c: ", mpsRun{res: ocirun.Result{Stdout: out}, err: tc.runErr}, !tc.noGPU, probeUUID)
			var failed, skipped []string
			for _, res := range r.results {
				switch res.status {
				case "FAIL":
					failed = append(failed, res.check)
				case "SKIP":
					skipped = append(skipped, res.check)
				}
			}
			if strings.Join(failed, ",") != strings.Join(tc.failed, ",") || strings.Join(skipped, ",") != strings.Join(tc.skipped, ",") {
				t.Errorf("failed %q, skipped %q; want %q, %q\n%s", failed, skipped, tc.failed, tc.skipped, buf.String())
			}
		})
	}
}

func TestSmokeMPSClaimAsksForTheLimit(t *testing.T) {
	dev := &resourceapi.Device{Name: "gpu-0"}
	claim := smokeMPSClaim(dev)
	cfg := claim.Status.Allocation.Devices.Config
	if len(cfg) != 1 || cfg[0].Opaque == nil || cfg[0].Opaque.Driver != driverName || claim.UID == smokeClaim(dev).UID {
		t.Fatalf("claim %+v", claim)
	}
	// Decoded as the plugin decodes it (strict, validated).
	c, err := configapi.Decode(cfg[0].Opaque.Parameters.Raw)
	if err != nil {
		t.Fatal(err)
	}
	sh := c.GetSharing()
	if sh == nil || sh.Strategy != configapi.MpsStrategy || sh.MpsConfig == nil || sh.MpsConfig.DefaultPinnedDeviceMemoryLimit == nil ||
		sh.MpsConfig.DefaultPinnedDeviceMemoryLimit.Value() != mpsLimitMiB<<20 {
		t.Errorf("sharing %+v, want MPS with a %d MiB limit", sh, mpsLimitMiB)
	}
}

// The daemon child mounts over the driver root's /tmp and /dev/shm: never
// in the mount namespace it was started from.
func TestMountDaemonDirsRefusesTheParentsNamespace(t *testing.T) {
	err := mountDaemonDirs(t.TempDir(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "mount namespace of its own") {
		t.Errorf("error %v, want a refusal", err)
	}
	if err := mountDaemonDirs("relative", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--dir") {
		t.Errorf("error %v, want one naming --dir", err)
	}
}
