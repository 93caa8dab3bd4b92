// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ocirun runs one command in a container made the way a container
// runtime makes a pod's container from a claim: a minimal OCI runtime spec
// over a root filesystem, the claim's CDI devices applied to it by the CDI
// library (device nodes and their cgroup rules, mounts, hooks, env), and
// runc running it in the foreground. It needs root (runc, mknod in the
// container's /dev) but no container runtime or image store: make
// gpu-smoke's container step uses it on GPU hosts and in tests without one.
package ocirun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

// Container is one run of Args in a container with the CDI devices named.
type Container struct {
	// Runc is the runc binary.
	Runc string
	// Rootfs is the template root filesystem. Each run copies it: the
	// runtime creates mount points in the root and nvidia-cdi-hook writes
	// symlinks and /etc/ld.so.cache into it.
	Rootfs string
	// CDIDirs hold the CDI specs that define Devices.
	CDIDirs []string
	// Devices are fully qualified CDI device names (vendor/class=name).
	Devices []string
	Args    []string
	Env     []string
	// Timeout bounds the run; the container is killed after it.
	Timeout time.Duration
}

// Result is what a run left behind.
type Result struct {
	Stdout, Stderr string
	// Spec is the OCI runtime spec the container ran with, CDI edits
	// applied.
	Spec *specs.Spec
}

var runs atomic.Int64

// Run copies the rootfs into workDir, writes the bundle and runs it. A
// non-nil error comes with whatever output there was.
func (c Container) Run(ctx context.Context, workDir string) (Result, error) {
	var res Result
	// One number per run, for its bundle and its container ID: runs may
	// go on at the same time (two MPS clients of one daemon).
	run := runs.Add(1)
	bundle := filepath.Join(workDir, fmt.Sprintf("bundle-%d", run))
	rootfs := filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return res, err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", c.Rootfs, rootfs).CombinedOutput(); err != nil {
		return res, fmt.Errorf("copy the rootfs %s: %v: %s", c.Rootfs, err, out)
	}
	spec, err := c.Spec(rootfs)
	if err != nil {
		return res, err
	}
	res.Spec = spec
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600); err != nil {
		return res, err
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// runc's state in the work directory, not /run/runc: nothing of the
	// host's runtime is touched, and a crash leaves nothing there.
	state := filepath.Join(workDir, "runc-state")
	id := fmt.Sprintf("gpu-smoke-%d-%d", os.Getpid(), run)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(c.Runc, "--root", state, "run", "--bundle", bundle, id)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("runc: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = exec.Command(c.Runc, "--root", state, "kill", id, "KILL").Run()
		err = <-done
		if err == nil {
			err = ctx.Err()
		}
		err = fmt.Errorf("runc run: %w (killed after %v)", err, timeout)
	}
	// A run that failed half-way may leave its state; delete -f is a no-op otherwise.
	_ = exec.Command(c.Runc, "--root", state, "delete", "-f", id).Run()
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	if err != nil {
		return res, fmt.Errorf("runc run: %w: %s", err, lastLines(res.Stderr, 3))
	}
	return res, nil
}

// Spec returns the runtime spec of the container over rootfs: a minimal
// one (what `runc spec` writes, without a terminal) with the CDI devices
// injected by the CDI library, as containerd does for a pod.
func (c Container) Spec(rootfs string) (*specs.Spec, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("ocirun: Container.Args is empty: name the command to run")
	}
	spec := baseSpec(rootfs, c.Args, c.Env)
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(c.CDIDirs...), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI cache over %v: %w", c.CDIDirs, err)
	}
	if unresolved, err := cache.InjectDevices(spec, c.Devices...); err != nil {
		return nil, fmt.Errorf("inject CDI devices %v (unresolved %v): %w", c.Devices, unresolved, err)
	}
	return spec, nil
}

// defaultCaps are the capabilities `runc spec` grants: a container's, not
// root's on the host.
var defaultCaps = []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"}

func baseSpec(rootfs string, args, env []string) *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: rootfs},
		Process: &specs.Process{
			Args: args, Cwd: "/",
			Env: append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, env...),
			Capabilities: &specs.LinuxCapabilities{
				Bounding: defaultCaps, Effective: defaultCaps, Permitted: defaultCaps,
			},
			NoNewPrivileges: true,
		},
		Hostname: "gpu-smoke",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		},
		Linux: &specs.Linux{
			// Every device denied but runc's defaults (null, zero, ...):
			// the CDI edits allow the claim's nodes, as in a pod.
			Resources: &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.CgroupNamespace},
			},
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
		},
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
