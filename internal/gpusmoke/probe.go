// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// What test/gpusmoke/probe/kernelprobe.c printed inside the smoke
// container, and the checks made of it.

package gpusmoke

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// probeOutput is kernelprobe's output, one field per line kind.
type probeOutput struct {
	// devs maps each NVIDIA device node seen in /dev to "major:minor".
	devs     map[string]string
	ldcache  string // the ld cache's path for libcuda.so.1; "none" when absent
	lib      string // where dlopen("libcuda.so.1") found it; "error ..." when it failed
	cuInit   int    // -1 when not called
	initName string
	count    int // cuDeviceGetCount; -1 when not called
	uuids    []string
	kernel   string   // "PASS 4096" or "FAIL ..."; empty when not run
	allocs   []string // "MIB RC NAME" per --alloc size
	// mps is CUDA_MPS_PIPE_DIRECTORY, mpsControl what the control daemon's
	// socket there is ("socket", "missing", "other"), mpsLimit
	// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; "none" when unset, "" when the
	// probe did not say.
	mps, mpsControl, mpsLimit string
	done                      bool
}

func parseProbe(out string) probeOutput {
	p := probeOutput{devs: map[string]string{}, cuInit: -1, count: -1}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(line, f[0]))
		switch {
		case f[0] == "dev" && len(f) == 3:
			p.devs[f[1]] = f[2]
		case f[0] == "ldcache" && len(f) == 3:
			p.ldcache = f[2]
		case f[0] == "lib" && len(f) >= 3:
			p.lib = strings.TrimSpace(strings.TrimPrefix(rest, f[1]))
			if f[2] != "error" {
				p.lib = f[2]
			}
		case f[0] == "cuInit" && len(f) >= 2:
			p.cuInit, _ = strconv.Atoi(f[1])
			if len(f) > 2 {
				p.initName = f[2]
			}
		case f[0] == "devices" && len(f) == 3 && f[1] == "0":
			p.count, _ = strconv.Atoi(f[2])
		case f[0] == "uuid" && len(f) == 3:
			p.uuids = append(p.uuids, f[2])
		case f[0] == "kernel":
			p.kernel = rest
		case f[0] == "alloc":
			p.allocs = append(p.allocs, rest)
		case f[0] == "mps" && len(f) == 2:
			p.mps = f[1]
		case f[0] == "mpscontrol" && len(f) == 2:
			p.mpsControl = f[1]
		case f[0] == "mpslimit" && len(f) == 2:
			p.mpsLimit = f[1]
		case f[0] == "done":
			p.done = true
		}
	}
	return p
}

var gpuNode = regexp.MustCompile(`^/dev/nvidia[0-9]+$`)

// probeWant is what the container must show.
type probeWant struct {
	// nodes are the NVIDIA device nodes of the container's runtime spec
	// (path -> "major:minor"), gpuNode the claimed GPU's.
	nodes   map[string]string
	gpuNode string
	uuid    string
	// realGPU: cuInit must give 0 and the kernel run; otherwise the
	// device nodes are simulated and cuInit must give 100.
	realGPU bool
}

// checkProbe reports the container step's checks of one probe run.
func checkProbe(r *report, out string, want probeWant) {
	p := parseProbe(out)
	if !p.done {
		r.fail("probe ran", "no \"done\" line: %s", lastLine(out))
		return
	}
	var seen, gpus []string
	for path, nums := range p.devs {
		seen = append(seen, path+" "+nums)
		if gpuNode.MatchString(path) {
			gpus = append(gpus, path)
		}
	}
	var spec []string
	for path, nums := range want.nodes {
		spec = append(spec, path+" "+nums)
	}
	slices.Sort(seen)
	slices.Sort(spec)
	r.check(slices.Equal(seen, spec) && slices.Equal(gpus, []string{want.gpuNode}), "device nodes",
		"saw %v; the spec's %v; GPU nodes %v, want only %s", seen, spec, gpus, want.gpuNode)

	r.check(p.ldcache != "" && p.ldcache != "none" && p.lib == p.ldcache, "libcuda via the hook's ld cache",
		"ld.so.cache names %s; dlopen(\"libcuda.so.1\") loaded %s", p.ldcache, p.lib)

	wantInit, why := 100, "simulated device nodes, no GPU behind them"
	if want.realGPU {
		wantInit, why = 0, "a real GPU"
	}
	r.check(p.cuInit == wantInit, "cuInit", "cuInit %d %s, want %d (%s)", p.cuInit, p.initName, wantInit, why)
	if !want.realGPU {
		r.skip("GPU UUID and CUDA kernel", "skipped: no GPU (cuInit %d on simulated device nodes)", p.cuInit)
		return
	}
	r.check(p.count == 1 && len(p.uuids) == 1 && p.uuids[0] == want.uuid, "GPU UUID",
		"cuDeviceGetCount %d, cuDeviceGetUuid %v, want only the claim's %s", p.count, p.uuids, want.uuid)
	r.check(strings.HasPrefix(p.kernel, "PASS"), "CUDA kernel", "PTX JIT-compiled by the driver, out[i] = i*i: %s", orNone(p.kernel))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func orNone(s string) string {
	if s == "" {
		return "not run"
	}
	return s
}
