// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// probeLib is one library as cudaprobe found it: the path the loader
// opened, where that path leads, and the file's size and FNV-1a hash.
type probeLib struct {
	loaded, real string
	size         string
	hash         string
	err          string
}

// probeOut is what test/e2e/probe/cudaprobe.c printed in one container.
type probeOut struct {
	ldcache  map[string]string // soname -> path in the container's ld.so.cache
	libs     map[string]probeLib
	version  string // "<CUresult> <version>"
	cuInit   string
	mps      string
	devs     map[string]string // /dev path -> "major:minor"
	nonDevs  []string
	complete bool
	raw      string
}

func parseProbe(out string) probeOut {
	p := probeOut{ldcache: map[string]string{}, libs: map[string]probeLib{}, devs: map[string]string{}, raw: out}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "ldcache" && len(f) == 3:
			p.ldcache[f[1]] = f[2]
		case f[0] == "lib" && len(f) == 6:
			p.libs[f[1]] = probeLib{loaded: f[2], real: f[3], size: f[4], hash: f[5]}
		case f[0] == "lib" && len(f) >= 3 && f[2] == "error":
			p.libs[f[1]] = probeLib{err: strings.Join(f[3:], " ")}
		case f[0] == "cuDriverGetVersion" && len(f) == 3:
			p.version = f[1] + " " + f[2]
		case f[0] == "cuInit" && len(f) == 2:
			p.cuInit = f[1]
		case f[0] == "mps" && len(f) == 2:
			p.mps = f[1]
		case f[0] == "dev" && len(f) == 3 && f[2] == "not-a-device":
			p.nonDevs = append(p.nonDevs, f[1])
		case f[0] == "dev" && len(f) == 3:
			p.devs[f[1]] = f[2]
		case f[0] == "done":
			p.complete = true
		}
	}
	return p
}

// hostLib is a library of the driver root as cudaprobe reports one: size
// and FNV-1a hash, for comparison with a container's.
func hostLib(root, rel string) (size, hash string, err error) {
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := fnv.New64a()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", "", err
	}
	return fmt.Sprint(n), fmt.Sprintf("%016x", h.Sum64()), nil
}

// checkLibs: both libraries resolve through the container's ld cache to
// the driver root's R535 files, byte for byte.
func checkLibs(p probeOut, root string) []string {
	return checkLibsOf(p, root, r535Driver)
}

// checkLibsOf: both libraries resolve through the container's ld cache to
// the driver root's files of that driver version, byte for byte.
func checkLibsOf(p probeOut, root, version string) []string {
	var bad []string
	for soname, file := range map[string]string{"libcuda.so.1": "libcuda.so." + version, "libnvidia-ml.so.1": "libnvidia-ml.so." + version} {
		l := p.libs[soname]
		if l.err != "" || l.loaded == "" {
			bad = append(bad, fmt.Sprintf("%s not loaded: %s", soname, l.err))
			continue
		}
		if c := p.ldcache[soname]; c == "" || c == "none" || c != l.loaded {
			bad = append(bad, fmt.Sprintf("%s: the loader opened %s, the ld cache says %q", soname, l.loaded, c))
		}
		if filepath.Base(l.real) != file {
			bad = append(bad, fmt.Sprintf("%s resolves to %s, want %s", soname, l.real, file))
			continue
		}
		size, hash, err := hostLib(root, "usr/lib/x86_64-linux-gnu/nvidia/current/"+file)
		if err != nil {
			bad = append(bad, err.Error())
		} else if l.size != size || l.hash != hash {
			bad = append(bad, fmt.Sprintf("%s: %s bytes, hash %s; the driver root's %s has %s bytes, hash %s", soname, l.size, l.hash, file, size, hash))
		}
	}
	return bad
}
