// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DaemonLauncher builds the command of a daemon run as a local process.
type DaemonLauncher interface {
	// Command returns the daemon command for a device; it must stay in
	// the foreground and stop on SIGTERM.
	Command(d *Daemon) *exec.Cmd
}

// ProcessRunner runs daemons as local processes in sessions of their own.
// They die with the plugin's container (its runtime kills the whole
// cgroup), so a cluster uses PodRunner; this one serves tests and a plugin
// run directly on a host.
type ProcessRunner struct {
	Launcher DaemonLauncher
}

var _ Runner = ProcessRunner{}

// Start implements Runner.
func (r ProcessRunner) Start(_ context.Context, d *Daemon) error {
	if r.Launcher == nil {
		return errors.New("no way to run MPS daemons here: in a cluster the plugin runs them as pods (flags --namespace and --mps-daemon-image, which the chart sets)")
	}
	cmd := r.Launcher.Command(d)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	logf, err := os.OpenFile(filepath.Join(d.LogDir(), "daemon.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	// Reap it in the background if it dies while this process lives.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(d.PIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

// pid returns the daemon's pid when it runs. The pid file may come from
// another PID namespace (an earlier plugin container): only a process that
// runs with this daemon's directory in its environment is this daemon.
func (r ProcessRunner) pid(d *Daemon) (int, bool) {
	data, err := os.ReadFile(d.PIDFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 || !processRuns(pid) {
		return 0, false
	}
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil || !strings.Contains(string(env), d.Dir) {
		return 0, false
	}
	return pid, true
}

// Running implements Runner.
func (r ProcessRunner) Running(_ context.Context, d *Daemon) (bool, error) {
	_, ok := r.pid(d)
	return ok, nil
}

// Stop implements Runner: SIGTERM, which the launched command turns into
// its orderly stop, then SIGKILL after 5s.
func (r ProcessRunner) Stop(_ context.Context, d *Daemon) error {
	pid, running := r.pid(d)
	if !running {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, still := r.pid(d); !still {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return nil
}

// List implements Runner: local daemons are found by their directories.
func (r ProcessRunner) List(context.Context) ([]string, error) { return nil, nil }
