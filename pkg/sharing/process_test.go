// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets this test binary double as the simulated MPS control daemon
// (StandIn re-runs the executable with StandInEnv set).
func TestMain(m *testing.M) {
	RunStandInIfRequested()
	os.Exit(m.Run())
}

// shortRoot is a state directory short enough that an absolute socket path
// under it stays within the 108 bytes of a unix socket address.
func shortRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mps")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// The stand-in launched as a local process: Ensure waits for its control
// socket, Running finds it by its pid file and environment, clients hear
// from it, and Stop ends it; stopping it again is no error.
func TestProcessRunnerRunsTheStandIn(t *testing.T) {
	m := &MPS{Root: shortRoot(t), Runner: ProcessRunner{Launcher: StandIn{}}, ReadyTimeout: 60 * time.Second}
	d := m.Daemon("GPU-a")
	ctx := context.Background()
	if ok, err := m.Runner.Running(ctx, d); ok || err != nil {
		t.Fatalf("Running before Start: %v %v", ok, err)
	}
	if err := m.Ensure(d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Runner.Stop(ctx, d) })
	pid, ok := m.PID(d)
	if !ok {
		t.Fatal("no running pid after Ensure")
	}
	if ok, err := m.Runner.Running(ctx, d); !ok || err != nil {
		t.Fatalf("Running after Ensure: %v %v", ok, err)
	}
	// A second Ensure reuses the daemon.
	if err := m.Ensure(d); err != nil {
		t.Fatal(err)
	}
	if again, _ := m.PID(d); again != pid {
		t.Fatalf("second Ensure replaced daemon %d with %d", pid, again)
	}
	if _, err := os.Stat(filepath.Join(d.LogDir(), "daemon.out")); err != nil {
		t.Errorf("daemon output file: %v", err)
	}

	// A client hears its daemon's pid, then learns that the daemon went.
	out := &syncBuffer{}
	clientDone := make(chan error, 1)
	go func() { clientDone <- RunStandInClient(context.Background(), d.PipeDir(), out) }()
	// Generous: `make test` runs every package at once under the race
	// detector on 2 cores. A client that ended fails at once, with why.
	greeting := StandInGreeting + strconv.Itoa(pid)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), greeting); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-clientDone:
			t.Fatalf("the client ended before its daemon greeted it: %v; output %q", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no greeting %q within 60s; client output %q", greeting, out.String())
		}
	}

	if err := m.Stop(d); err != nil {
		t.Fatal(err)
	}
	// Stop returns once the pid file is gone, which the stand-in removes
	// as it exits: the process itself ends a moment later.
	waitFor(t, func() bool { return !processRuns(pid) })
	if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
		t.Errorf("daemon directory left after Stop: %v", err)
	}
	select {
	case err := <-clientDone:
		if err == nil || !strings.Contains(err.Error(), "went away") {
			t.Errorf("client of a stopped daemon: %v, want it told the daemon went away", err)
		}
	case <-time.After(60 * time.Second):
		t.Error("the client did not notice its daemon stopped")
	}
	if ok, _ := m.Runner.Running(ctx, d); ok {
		t.Error("Running after Stop")
	}
	if err := m.Stop(d); err != nil {
		t.Errorf("stopping a daemon already gone: %v", err)
	}
	if names, err := m.Runner.List(ctx); err != nil || len(names) != 0 {
		t.Errorf("List = %v, %v; local daemons are found by their directories", names, err)
	}
}

// A pid file may name a process of another PID namespace: a process that
// runs, but without the daemon's directory in its environment, is not it.
func TestProcessRunnerIgnoresAPIDOfAnotherProcess(t *testing.T) {
	r := ProcessRunner{Launcher: StandIn{}}
	d := (&MPS{Root: t.TempDir()}).Daemon("GPU-a")
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// This test process runs but is no daemon.
	if err := os.WriteFile(d.PIDFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Running(context.Background(), d); ok {
		t.Fatal("this test process counts as the daemon")
	}
	// Stop must not signal it (the test would die of SIGTERM).
	if err := r.Stop(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"x", "0", "-1", "4194305"} {
		if err := os.WriteFile(d.PIDFile(), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if ok, _ := r.Running(context.Background(), d); ok {
			t.Errorf("pid file %q counts as a running daemon", bad)
		}
	}
}

type launcherFunc func(d *Daemon) *exec.Cmd

func (f launcherFunc) Command(d *Daemon) *exec.Cmd { return f(d) }

func TestProcessRunnerStartErrors(t *testing.T) {
	ctx := context.Background()
	d := (&MPS{Root: t.TempDir()}).Daemon("GPU-a")
	err := ProcessRunner{}.Start(ctx, d)
	if err == nil || !strings.Contains(err.Error(), "--mps-daemon-image") {
		t.Errorf("Start without a launcher: %v, want the flags that make the plugin run daemon pods", err)
	}
	// No log directory yet: the daemon's output has nowhere to go.
	sh := launcherFunc(func(*Daemon) *exec.Cmd { return exec.Command("sleep", "60") })
	if err := (ProcessRunner{Launcher: sh}).Start(ctx, d); err == nil {
		t.Error("Start without a log directory succeeded")
	}
	if err := os.MkdirAll(d.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	missing := launcherFunc(func(*Daemon) *exec.Cmd { return exec.Command(filepath.Join(d.Dir, "no-such-daemon")) })
	if err := (ProcessRunner{Launcher: missing}).Start(ctx, d); err == nil {
		t.Error("Start of a program that does not exist succeeded")
	}
	if _, err := os.Stat(d.PIDFile()); !os.IsNotExist(err) {
		t.Errorf("pid file written for a daemon that never started: %v", err)
	}
	// The pid file cannot be written (a directory is in its way): the
	// started process is killed rather than left without a record.
	if err := os.MkdirAll(d.PIDFile(), 0o755); err != nil {
		t.Fatal(err)
	}
	var started *exec.Cmd
	rec := launcherFunc(func(*Daemon) *exec.Cmd { started = exec.Command("sleep", "60"); return started })
	if err := (ProcessRunner{Launcher: rec}).Start(ctx, d); err == nil {
		t.Fatal("Start succeeded without a pid file")
	}
	waitFor(t, func() bool { return !processRuns(started.Process.Pid) })
}

// A daemon that ignores SIGTERM is killed after its grace period.
func TestProcessRunnerStopKillsADaemonThatIgnoresSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 5s grace period")
	}
	m := &MPS{Root: shortRoot(t), Runner: ProcessRunner{Launcher: launcherFunc(func(d *Daemon) *exec.Cmd {
		cmd := exec.Command("sh", "-c", `trap "" TERM; touch "$P"; while :; do sleep 0.1; done`)
		cmd.Env = append(os.Environ(), "P="+d.ControlPipe(), "DAEMON_DIR="+d.Dir)
		return cmd
	})}, ReadyTimeout: 60 * time.Second}
	d := m.Daemon("GPU-a")
	if err := m.Ensure(d); err != nil {
		t.Fatal(err)
	}
	pid, ok := m.PID(d)
	if !ok {
		t.Fatal("no daemon pid")
	}
	start := time.Now()
	if err := m.Runner.Stop(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 4*time.Second {
		t.Errorf("Stop returned after %v, before the grace period", took)
	}
	waitFor(t, func() bool { return !processRuns(pid) })
}

// Each client sees its own MPS limits from its environment; without a
// daemon it fails, and when its context ends it stops quietly.
func TestStandInClient(t *testing.T) {
	t.Setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25")
	dir := shortRoot(t)
	out := &syncBuffer{}
	err := RunStandInClient(context.Background(), filepath.Join(dir, "pipe"), out)
	if err == nil || !strings.Contains(err.Error(), "connect to the MPS control daemon") {
		t.Fatalf("client without a daemon: %v", err)
	}
	if !strings.Contains(out.String(), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25") {
		t.Errorf("client output %q lacks its limit", out.String())
	}

	t.Chdir(dir) // RunStandIn changes into its pipe directory
	dctx, stopDaemon := context.WithCancel(context.Background())
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- RunStandIn(dctx, dir) }()
	defer stopDaemon()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "pipe", "control")); return err == nil })
	if data, _ := os.ReadFile(filepath.Join(dir, "daemon.pid")); string(data) != strconv.Itoa(os.Getpid()) {
		t.Errorf("stand-in pid file holds %q, want %d", data, os.Getpid())
	}

	cctx, stopClient := context.WithCancel(context.Background())
	out = &syncBuffer{}
	clientDone := make(chan error, 1)
	go func() { clientDone <- RunStandInClient(cctx, filepath.Join(dir, "pipe"), out) }()
	waitFor(t, func() bool { return strings.Contains(out.String(), StandInGreeting+strconv.Itoa(os.Getpid())) })
	stopClient()
	if err := <-clientDone; err != nil {
		t.Errorf("client whose context ended: %v, want no error", err)
	}

	stopDaemon()
	select {
	case err := <-daemonDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stand-in did not stop with its context")
	}
	for _, f := range []string{filepath.Join(dir, "pipe", "control"), filepath.Join(dir, "daemon.pid")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s left after the stand-in stopped: %v", f, err)
		}
	}
}

func TestStandInErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RunStandIn(context.Background(), file); err == nil {
		t.Error("stand-in in a directory that is a file")
	}
	// Something that is no socket holds the control path.
	dir := shortRoot(t)
	if err := os.MkdirAll(filepath.Join(dir, "pipe", "control", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RunStandIn(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "control socket") {
		t.Errorf("stand-in whose control path is taken: %v", err)
	}
	// The pid file cannot be written: the socket is closed again.
	dir = shortRoot(t)
	if err := os.MkdirAll(filepath.Join(dir, "daemon.pid", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := RunStandIn(context.Background(), dir); err == nil {
		t.Error("stand-in without a pid file")
	}
	if out := (&syncBuffer{}); RunStandInClient(context.Background(), filepath.Join(dir, "pipe"), out) == nil {
		t.Error("a client reached a stand-in that had failed to start")
	}
}

// Without StandInEnv the process is no stand-in and goes on.
func TestRunStandInIfRequestedWithoutTheEnvironment(t *testing.T) {
	t.Setenv(StandInEnv, "")
	RunStandInIfRequested() // would exit the test binary if it ran the stand-in
}

func TestStandInCommandReRunsTheExecutable(t *testing.T) {
	d := (&MPS{Root: "/s/mps"}).Daemon("GPU-a")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for exe, want := range map[string]string{"": self, "/opt/plugin": "/opt/plugin"} {
		cmd := StandIn{Exe: exe}.Command(d)
		if cmd.Path != want {
			t.Errorf("StandIn{Exe: %q} runs %s, want %s", exe, cmd.Path, want)
		}
		if got := cmd.Env[len(cmd.Env)-1]; got != StandInEnv+"="+d.Dir {
			t.Errorf("stand-in environment ends with %q, want its directory", got)
		}
	}
}

// processRuns: a zombie (exited, not yet reaped) is no running daemon.
func TestPIDOfAZombieIsNotRunning(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := cmd.Process.Pid
	waitFor(t, func() bool {
		stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return strings.Contains(string(stat), ") Z ")
	})
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the zombie cannot be signalled; the test proves nothing")
	}
	if processRuns(pid) {
		t.Error("a zombie counts as a running process")
	}
}

// syncBuffer is a bytes.Buffer that a client goroutine may write while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 60s")
}
