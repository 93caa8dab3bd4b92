// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// XIDs are the error codes the NVIDIA kernel driver reports (in the kernel
// log as "NVRM: Xid" and through NVML's XID critical-error events). Their
// meanings follow NVIDIA's XID catalogue,
// https://docs.nvidia.com/deploy/xid-errors/ ("Xid error listing").
var xidMeanings = map[uint64]string{
	13:  "graphics engine exception (usually an application fault)",
	31:  "GPU memory page fault (usually an application's illegal access)",
	43:  "GPU stopped processing (an application hit a software-induced fault)",
	45:  "preemptive cleanup after earlier errors (an application was killed or failed)",
	48:  "double-bit ECC error: uncorrectable memory error",
	63:  "ECC page retirement or row remapping recorded: the GPU needs a reset to use the remapped rows",
	64:  "ECC page retirement or row remapping failed: the memory error could not be isolated",
	68:  "video processor (NVDEC) exception",
	74:  "NVLink error: a link between GPUs failed",
	79:  "GPU has fallen off the bus: it no longer answers on PCIe",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error: the affected application must restart",
	95:  "uncontained ECC error: every application on the GPU is affected and the GPU needs a reset",
	109: "context switch timeout",
}

// DefaultIgnoredXIDs are application errors: the GPU is still healthy and
// only the application that caused them is affected. This is the list
// NVIDIA's own tooling ignores: k8s-device-plugin (internal/rm/health.go,
// getDisabledHealthCheckXids) and k8s-dra-driver-gpu
// (cmd/gpu-kubelet-plugin/device_health.go, xidsToSkip) both skip exactly
// these, citing the catalogue's application-error class.
var DefaultIgnoredXIDs = []uint64{13, 31, 43, 45, 68, 109}

// XIDMeaning describes an XID for logs, events and conditions.
func XIDMeaning(xid uint64) string {
	if m, ok := xidMeanings[xid]; ok {
		return m
	}
	return "see NVIDIA's XID catalogue"
}

// XIDSet is a set of XIDs.
type XIDSet map[uint64]bool

// IgnoredXIDs returns the default ignored XIDs plus extra ones (the
// --health-ignored-xids flag).
func IgnoredXIDs(extra []uint64) XIDSet {
	s := XIDSet{}
	for _, x := range DefaultIgnoredXIDs {
		s[x] = true
	}
	for _, x := range extra {
		s[x] = true
	}
	return s
}

// Sorted lists the set in ascending order (for logs).
func (s XIDSet) Sorted() []uint64 {
	out := make([]uint64, 0, len(s))
	for x := range s {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ParseXIDs parses XIDs given as strings ("79", " 94 "); flag names the
// flag in the error.
func ParseXIDs(flag string, values []string) ([]uint64, error) {
	var out []uint64
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		x, err := strconv.ParseUint(v, 10, 32)
		if err != nil || x == 0 {
			return nil, fmt.Errorf("%s: %q is not an XID; give positive numbers such as 13,31 (see https://docs.nvidia.com/deploy/xid-errors/)", flag, v)
		}
		out = append(out, x)
	}
	return out, nil
}
