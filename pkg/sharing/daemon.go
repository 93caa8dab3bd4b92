// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DaemonProgram is what a daemon pod runs (`gpu-kubelet-plugin
// mps-control-daemon`): one device's MPS control daemon, kept in the
// foreground so that the pod lives exactly as long as the daemon, and
// stopped with `quit` when the pod is deleted.
//
// It does not set the GPU's compute mode. NVIDIA's MPS documentation
// starts the daemon after `nvidia-smi -i 0 -c EXCLUSIVE_PROCESS` ("Starting
// MPS control daemon"; exclusive mode then applies to the MPS server, not
// its clients, so only the server holds a context on the GPU), and NVIDIA's
// DRA driver sets it before starting a daemon. Here the allocation already makes the claim's pods the GPU's only
// users, the mode is GPU-wide (it cannot be set for one MIG device, and
// would be left behind by a crash), and a GPU setting changed on the host
// is a setting some other tool may rely on. A process that bypasses MPS
// inside the claim's own pods (by unsetting CUDA_MPS_PIPE_DIRECTORY) is the
// one thing EXCLUSIVE_PROCESS would stop; the README lists it.
type DaemonProgram struct {
	DeviceUUID string
	// Dir is the daemon's directory (Daemon.Dir) as mounted in the pod;
	// the pid file goes there.
	Dir string
	// DriverRoot is the driver root as mounted in the pod (read-only),
	// with the daemon's directory mounted at its /tmp and the pod's tmpfs
	// at its /dev/shm (PodRunner.Pod). Empty runs the simulated stand-in
	// instead.
	DriverRoot string
	// Dirs are the pipe and log directories inside the driver root
	// (PodRunner passes /tmp/pipe and /tmp/log); DefaultMPSDirs when empty.
	Dirs MPSDirs
	// Defaults are set on the daemon once it accepts commands (see
	// Daemon.Defaults); zero limits are left as NVIDIA's defaults.
	Defaults Settings
	// QuitTimeout bounds the orderly stop; 20s when zero.
	QuitTimeout time.Duration
	Log         io.Writer
}

// Run runs the daemon until ctx ends (the pod's SIGTERM), then stops it.
// It returns an error when the daemon exits on its own.
func (p DaemonProgram) Run(ctx context.Context) error {
	if err := CheckDeviceUUID(p.DeviceUUID); err != nil {
		return err
	}
	if p.Log == nil {
		p.Log = io.Discard
	}
	if p.DriverRoot == "" {
		return RunStandIn(ctx, p.Dir)
	}
	if p.Dirs == (MPSDirs{}) {
		p.Dirs = DefaultMPSDirs
	}
	drv := NvidiaTools{Root: p.DriverRoot}
	// The daemon is not bound to ctx: it must get `quit` first.
	cmd, err := drv.DaemonCommand(context.Background(), p.DeviceUUID, p.Dirs)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = p.Log, p.Log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start nvidia-cuda-mps-control -f: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// With the pod's hostPID this is the host's PID of the daemon.
	pidFile := filepath.Join(p.Dir, "daemon.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	defer os.Remove(pidFile)
	go p.setDefaults(ctx, drv)
	select {
	case err := <-exited:
		return fmt.Errorf("nvidia-cuda-mps-control exited: %v; see %s", err, filepath.Join(p.Dir, "log", "control.log"))
	case <-ctx.Done():
	}
	timeout := p.QuitTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	qctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := drv.Quit(qctx, p.Dirs); err != nil {
		fmt.Fprintln(p.Log, err)
	}
	select {
	case err := <-exited:
		// Asked to quit, it quit: its exit status says nothing more.
		_ = err
		return nil
	case <-qctx.Done():
		_ = cmd.Process.Kill()
		return fmt.Errorf("nvidia-cuda-mps-control did not quit in time; killed it (%v)", <-exited)
	}
}

// setDefaults waits for the daemon's control pipe and sets its defaults,
// logging each answer; a failure leaves NVIDIA's defaults (clients carry
// their own limits anyway).
func (p DaemonProgram) setDefaults(ctx context.Context, drv NvidiaTools) {
	cmds := DefaultCommands(p.Defaults)
	if len(cmds) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := waitForFile(ctx, filepath.Join(p.DriverRoot, p.Dirs.Pipe, "control"), "MPS control daemon for "+p.DeviceUUID); err != nil {
		fmt.Fprintln(p.Log, "defaults not set:", err)
		return
	}
	// The daemon's own answers, for its log: what its clients get.
	cmds = append(cmds, "get_default_active_thread_percentage", "get_default_device_pinned_mem_limit 0")
	for _, c := range cmds {
		out, err := drv.Control(ctx, p.Dirs, c)
		if err != nil {
			fmt.Fprintln(p.Log, "defaults:", err)
			continue
		}
		fmt.Fprintf(p.Log, "%s: %s\n", c, out)
	}
}
