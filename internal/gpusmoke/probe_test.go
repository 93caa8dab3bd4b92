// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package gpusmoke

import (
	"bytes"
	"strings"
	"testing"
)

const probeUUID = "GPU-5c041b8f-aab5-be1c-5b38-604ddcec63e2"

// probeOnGPU is kernelprobe's output where everything works, in the
// shape the probe prints (test/gpusmoke/probe/kernelprobe.c).
const probeOnGPU = `dev /dev/nvidiactl 195:255
dev /dev/nvidia-uvm 511:0
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
mps none
done
`

func gpuWant() probeWant {
	return probeWant{
		nodes:   map[string]string{"/dev/nvidiactl": "195:255", "/dev/nvidia-uvm": "511:0", "/dev/nvidia3": "195:3"},
		gpuNode: "/dev/nvidia3", uuid: probeUUID, realGPU: true,
	}
}

func TestCheckProbe(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(out string) string
		want   func(w *probeWant)
		failed []string
	}{
		{name: "all good"},
		{
			name:   "another GPU's node visible",
			edit:   func(out string) string { return "dev /dev/nvidia4 195:4\n" + out },
			failed: []string{"device nodes"},
		},
		{
			name:   "a spec node missing",
			edit:   func(out string) string { return strings.Replace(out, "dev /dev/nvidia-uvm 511:0\n", "", 1) },
			failed: []string{"device nodes"},
		},
		{
			name:   "claimed GPU's node has other numbers",
			edit:   func(out string) string { return strings.Replace(out, "/dev/nvidia3 195:3", "/dev/nvidia3 195:7", 1) },
			failed: []string{"device nodes"},
		},
		{
			name: "libcuda found without the ld cache",
			edit: func(out string) string {
				return strings.Replace(out, "ldcache libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1", "ldcache libcuda.so.1 none", 1)
			},
			failed: []string{"libcuda via the hook's ld cache"},
		},
		{
			name: "libcuda not loaded",
			edit: func(out string) string {
				i := strings.Index(out, "lib libcuda")
				return out[:i] + "lib libcuda.so.1 error libcuda.so.1: cannot open shared object file\nmps none\ndone\n"
			},
			failed: []string{"libcuda via the hook's ld cache", "cuInit", "GPU UUID", "CUDA kernel"},
		},
		{
			name: "cuInit fails on a GPU",
			edit: func(out string) string {
				return strings.Replace(out, "cuInit 0 CUDA_SUCCESS", "cuInit 999 CUDA_ERROR_UNKNOWN", 1)
			},
			failed: []string{"cuInit"},
		},
		{
			name: "another GPU's UUID",
			edit: func(out string) string {
				return strings.Replace(out, probeUUID, "GPU-00000000-0000-0000-0000-000000000000", 1)
			},
			failed: []string{"GPU UUID"},
		},
		{
			name: "kernel result wrong",
			edit: func(out string) string {
				return strings.Replace(out, "kernel PASS 4096", "kernel FAIL out[17]=0 want 289", 1)
			},
			failed: []string{"CUDA kernel"},
		},
		{
			name:   "probe died",
			edit:   func(out string) string { return strings.Replace(out, "done\n", "", 1) },
			failed: []string{"probe ran"},
		},
		{
			name: "no GPU: cuInit 100 passes, the rest skipped",
			edit: func(out string) string {
				i := strings.Index(out, "cuInit")
				return out[:i] + "cuInit 100 CUDA_ERROR_NO_DEVICE\nmps none\ndone\n"
			},
			want: func(w *probeWant) { w.realGPU = false },
		},
		{
			name:   "no GPU but cuInit 0",
			want:   func(w *probeWant) { w.realGPU = false },
			failed: []string{"cuInit"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := probeOnGPU
			if tc.edit != nil {
				out = tc.edit(out)
			}
			want := gpuWant()
			if tc.want != nil {
				tc.want(&want)
			}
			var buf bytes.Buffer
			r := &report{out: &buf}
			checkProbe(r, out, want)
			var failed []string
			for _, res := range r.results {
				if res.status == "FAIL" {
					failed = append(failed, res.check)
				}
			}
			if strings.Join(failed, ",") != strings.Join(tc.failed, ",") {
				t.Errorf("failed checks %q, want %q\n%s", failed, tc.failed, buf.String())
			}
		})
	}
}

func TestParseProbeAllocs(t *testing.T) {
	p := parseProbe("alloc 1024 0 CUDA_SUCCESS\nalloc 3072 2 CUDA_ERROR_OUT_OF_MEMORY\ndone\n")
	if len(p.allocs) != 2 || p.allocs[1] != "3072 2 CUDA_ERROR_OUT_OF_MEMORY" || !p.done {
		t.Errorf("parsed %+v", p)
	}
}
