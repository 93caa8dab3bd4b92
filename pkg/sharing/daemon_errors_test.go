// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// Facts about NVIDIA's tools these fakes rely on, from NVIDIA's
// documentation:
//   - Multi-Process Service guide, "Starting and Stopping MPS on Linux":
//     `nvidia-cuda-mps-control -d` (or -f, in the foreground) starts the
//     control daemon, and `echo quit | nvidia-cuda-mps-control` stops it;
//     the daemon's pipes live in CUDA_MPS_PIPE_DIRECTORY ("Environment
//     Variables"). A control command that cannot reach the daemon fails.
//   - nvidia-smi(1), "RETURN VALUE": a non-zero exit status (e.g. 4,
//     insufficient permissions) means the operation failed, with the
//     reason on its output.

// daemonsInRoot lists the processes whose root directory is root: the
// fake tools still running there.
func daemonsInRoot(root string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if seen, err := os.Readlink(filepath.Join("/proc", e.Name(), "root")); err == nil && seen == root {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestDaemonProgramRefusesABadDeviceUUID(t *testing.T) {
	root := t.TempDir()
	err := DaemonProgram{DeviceUUID: "../x", Dir: t.TempDir(), DriverRoot: root}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not a valid device UUID") {
		t.Fatalf("Run with a bad UUID: %v", err)
	}
}

func TestDaemonProgramWithoutTheToolNamesTheFix(t *testing.T) {
	err := DaemonProgram{DeviceUUID: fakeUUID, Dir: t.TempDir(), DriverRoot: t.TempDir()}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nvidia-cuda-mps-control not found") || !strings.Contains(err.Error(), "--driver-root") {
		t.Fatalf("Run without nvidia-cuda-mps-control: %v", err)
	}
}

// A tool that is there but cannot be run: the daemon does not start.
func TestDaemonProgramWhenTheDaemonCannotStart(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/nvidia-cuda-mps-control"), []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err := DaemonProgram{DeviceUUID: fakeUUID, Dir: dir, DriverRoot: root}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "start nvidia-cuda-mps-control -f") {
		t.Fatalf("Run with a tool that cannot run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "daemon.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file of a daemon that never started: %v", err)
	}
}

// Without a driver root the program is the simulated stand-in, serving its
// control socket until its context ends.
func TestDaemonProgramWithoutADriverRootRunsTheStandIn(t *testing.T) {
	dir := shortRoot(t)
	t.Chdir(dir)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- DaemonProgram{DeviceUUID: fakeUUID, Dir: dir}.Run(ctx) }()
	defer cancel()
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(dir, "pipe", "control")); return err == nil })
	out := &syncBuffer{}
	cctx, stopClient := context.WithCancel(context.Background())
	clientDone := make(chan error, 1)
	go func() { clientDone <- RunStandInClient(cctx, filepath.Join(dir, "pipe"), out) }()
	waitFor(t, func() bool { return strings.Contains(out.String(), StandInGreeting) })
	stopClient()
	<-clientDone
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stand-in did not stop")
	}
}

// The pid file cannot be written: the daemon just started is killed, not
// left running without a record.
func TestDaemonProgramKillsTheDaemonWithoutAPIDFile(t *testing.T) {
	root := fakeDriverRoot(t)
	err := DaemonProgram{DeviceUUID: fakeUUID, Dir: filepath.Join(t.TempDir(), "missing"), DriverRoot: root}.Run(context.Background())
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Run without a place for the pid file: %v", err)
	}
	waitFor(t, func() bool { return len(daemonsInRoot(root)) == 0 })
}

// A daemon that does not answer `quit` (here: the tool to send it is gone)
// is killed once QuitTimeout has passed, and the failed quit is logged.
func TestDaemonProgramKillsADaemonThatDoesNotQuit(t *testing.T) {
	root := fakeDriverRoot(t)
	dir := t.TempDir()
	log := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- DaemonProgram{DeviceUUID: fakeUUID, Dir: dir, DriverRoot: root, QuitTimeout: 300 * time.Millisecond, Log: log}.Run(ctx)
	}()
	if err := waitForFile(context.Background(), filepath.Join(root, ContainerPipeDir, "control"), "test"); err != nil {
		t.Fatal(err)
	}
	// The running daemon keeps its executable; `quit` finds no tool.
	if err := os.Remove(filepath.Join(root, "usr/bin/nvidia-cuda-mps-control")); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not quit in time; killed it") {
			t.Fatalf("Run with a daemon that does not quit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon program did not give up on its daemon")
	}
	if !strings.Contains(log.String(), "nvidia-cuda-mps-control not found") {
		t.Errorf("log %q lacks why quit failed", log.String())
	}
	if left := daemonsInRoot(root); len(left) != 0 {
		t.Errorf("processes %v still run in the driver root", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "daemon.pid")); !os.IsNotExist(err) {
		t.Error("pid file left behind")
	}
}

// `quit` that fails (the control pipe directory does not exist) is an error
// carrying what the tool printed.
func TestQuitReportsTheToolsFailure(t *testing.T) {
	root := fakeDriverRoot(t)
	err := NvidiaTools{Root: root}.Quit(context.Background(), MPSDirs{Pipe: "/no-such-pipe-dir", Log: ContainerLogDir})
	if err == nil || !strings.Contains(err.Error(), "nvidia-cuda-mps-control quit") || !strings.Contains(err.Error(), "/no-such-pipe-dir/quit") {
		t.Fatalf("failing quit: %v", err)
	}
	recs := records(t, root)
	if len(recs) != 1 || recs[0].Stdin != "quit\n" || !slices.Contains(recs[0].Env, "CUDA_MPS_PIPE_DIRECTORY=/no-such-pipe-dir") {
		t.Errorf("quit calls %+v", recs)
	}
	if err := (NvidiaTools{Root: t.TempDir()}).Quit(context.Background(), DefaultMPSDirs); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("quit without the tool: %v", err)
	}
}

// An interval nvidia-smi has no value for is refused before any tool runs;
// a root without nvidia-smi says where to point the plugin.
func TestSetTimeSliceErrorsBeforeRunningATool(t *testing.T) {
	root := fakeDriverRoot(t)
	d := NvidiaTools{Root: root}
	if err := d.SetTimeSlice(fakeUUID, "Sometimes"); err == nil || !strings.Contains(err.Error(), `"Sometimes"`) {
		t.Errorf("unknown interval: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "records.jsonl")); !os.IsNotExist(err) {
		t.Error("nvidia-smi ran for an unknown interval")
	}
	err := NvidiaTools{Root: t.TempDir()}.SetTimeSlice(fakeUUID, configapi.ShortTimeSlice)
	if err == nil || !strings.Contains(err.Error(), "nvidia-smi not found") {
		t.Errorf("no nvidia-smi: %v", err)
	}
}

// With no driver root (or "/") tools run from this host's own filesystem,
// without chroot, with only PATH and the given environment.
func TestToolWithoutADriverRootRunsOnTheHost(t *testing.T) {
	if _, err := os.Lstat("/usr/bin/true"); err != nil {
		t.Skip("no /usr/bin/true on this host")
	}
	for _, root := range []string{"", "/"} {
		cmd, err := NvidiaTools{Root: root}.Tool(context.Background(), "true", []string{"A=b"}, "x")
		if err != nil {
			t.Fatalf("root %q: %v", root, err)
		}
		if cmd.Path != "/usr/bin/true" || cmd.SysProcAttr != nil || cmd.Dir != "/" {
			t.Errorf("root %q: runs %s in %s with %+v, want /usr/bin/true in / without chroot", root, cmd.Path, cmd.Dir, cmd.SysProcAttr)
		}
		if !slices.Equal(cmd.Env, []string{toolPath, "A=b"}) || !slices.Equal(cmd.Args[1:], []string{"x"}) {
			t.Errorf("root %q: env %v args %v", root, cmd.Env, cmd.Args)
		}
		if err := cmd.Run(); err != nil {
			t.Errorf("root %q: %v", root, err)
		}
	}
	_, err := NvidiaTools{}.Tool(context.Background(), "no-such-nvidia-tool", nil)
	if err == nil || !strings.Contains(err.Error(), "driver root /") {
		t.Errorf("missing host tool: %v", err)
	}
}
