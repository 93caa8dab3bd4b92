// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package allocator

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// module is the allocator's module; its v0.N version is Kubernetes 1.N's.
const module = "k8s.io/dynamic-resource-allocation"

// ModuleVersion is the version of k8s.io/dynamic-resource-allocation this
// binary links: the allocator every answer here simulates.
func ModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == module {
				if d.Replace != nil && d.Replace.Version != "" {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return linkedVersion
}

// Minor is the Kubernetes minor ("1.38") whose scheduler allocator this
// binary runs.
func Minor() string {
	m, ok := minorOf(strings.Replace(ModuleVersion(), "v0.", "v1.", 1))
	if !ok {
		return "unknown"
	}
	return fmt.Sprintf("1.%d", m)
}

// minorOf is the minor of a Kubernetes version v1.N.x[-...] (a server's
// gitVersion, e.g. v1.37.2 or v1.38.0-gke.100).
func minorOf(v string) (int, bool) {
	rest, ok := strings.CutPrefix(v, "v1.")
	if !ok {
		return 0, false
	}
	if i := strings.IndexAny(rest, ".-+"); i >= 0 {
		rest = rest[:i]
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// Describe says which allocator the answers simulate, and warns when the
// cluster's API server (serverVersion, its /version gitVersion; "" when
// unknown) runs another minor: the kube-scheduler is at most one minor
// from the API server, so another minor's allocator may place claims
// otherwise (1.38's orders pools by name and takes the first fit, for
// one). warning is "" when the minors agree or the server's is unknown.
func Describe(serverVersion string) (line, warning string) {
	line = fmt.Sprintf("simulating the kube-scheduler allocator of Kubernetes %s (%s %s)", Minor(), module, ModuleVersion())
	server, ok := minorOf(serverVersion)
	own, ownOK := minorOf(strings.Replace(ModuleVersion(), "v0.", "v1.", 1))
	if !ok || !ownOK || server == own {
		return line, ""
	}
	return line, fmt.Sprintf("warning: the cluster's API server runs Kubernetes %s, these answers simulate %s's allocator: "+
		"where the two allocators differ the scheduler may place claims otherwise; use the kubectl-gpu release built for 1.%d", serverVersion, Minor(), server)
}
