// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// listRunner names the daemons it has and records what it was asked.
type listRunner struct {
	names   []string
	listErr error
	stopErr error
	stopped []string
	started []string
}

func (r *listRunner) Start(_ context.Context, d *Daemon) error {
	r.started = append(r.started, d.DeviceUUID)
	return nil
}
func (r *listRunner) Running(context.Context, *Daemon) (bool, error) { return false, nil }
func (r *listRunner) Stop(_ context.Context, d *Daemon) error {
	r.stopped = append(r.stopped, d.DeviceUUID)
	return r.stopErr
}
func (r *listRunner) List(context.Context) ([]string, error) { return r.names, r.listErr }

func TestCheckDeviceUUID(t *testing.T) {
	for _, ok := range []string{"GPU-0f2b7c1e-1111-2222-3333-444455556666", "MIG-abc", "a", "GPU_1.2"} {
		if err := CheckDeviceUUID(ok); err != nil {
			t.Errorf("CheckDeviceUUID(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", ".", "../etc", "a/b", "-rf", ".hidden", "a b", strings.Repeat("a", 129)} {
		err := CheckDeviceUUID(bad)
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("CheckDeviceUUID(%q) = %v, want an error quoting it", bad, err)
		}
	}
}

// Ensure and Stop act only on a daemon directory directly under Root: a
// record on disk cannot point them elsewhere.
func TestEnsureAndStopRefuseDaemonsOutsideTheRoot(t *testing.T) {
	r := &listRunner{}
	root := t.TempDir()
	// A short wait, so that an Ensure that wrongly went ahead fails fast.
	m := &MPS{Root: root, Runner: r, ReadyTimeout: 100 * time.Millisecond}
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep")
	if err := os.WriteFile(keep, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Daemon{
		{DeviceUUID: "..", Dir: filepath.Dir(root)},
		{DeviceUUID: "GPU-a", Dir: outside},
		{DeviceUUID: "GPU-a/../..", Dir: filepath.Join(root, "GPU-a/../..")},
	} {
		if err := m.Stop(d); err == nil {
			t.Errorf("Stop(%+v) was accepted", d)
		}
		if err := m.Ensure(d); err == nil {
			t.Errorf("Ensure(%+v) was accepted", d)
		}
	}
	if len(r.stopped) != 0 || len(r.started) != 0 {
		t.Errorf("the runner was asked to stop %v and start %v", r.stopped, r.started)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a file outside the root was removed: %v", err)
	}
}

func TestStopKeepsTheDirectoryWhenTheDaemonDoesNotStop(t *testing.T) {
	r := &listRunner{stopErr: errors.New("quit failed")}
	m := &MPS{Root: t.TempDir(), Runner: r}
	d := m.Daemon("GPU-a")
	if err := os.MkdirAll(d.PipeDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	err := m.Stop(d)
	if err == nil || !strings.Contains(err.Error(), "GPU-a") || !strings.Contains(err.Error(), "quit failed") {
		t.Errorf("Stop = %v, want the runner's error naming the device", err)
	}
	if _, err := os.Stat(d.PipeDir()); err != nil {
		t.Error("the directory of a daemon that may still run was removed")
	}
	// A root that is not a directory: nothing to remove, no error.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m = &MPS{Root: file, Runner: &listRunner{}}
	if err := m.Stop(m.Daemon("GPU-a")); err != nil {
		t.Errorf("Stop under a root that is a file: %v", err)
	}
}

func daemonNames(ds []*Daemon) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.DeviceUUID)
	}
	slices.Sort(out)
	return out
}

func TestDaemonsListsDirectoriesAndTheRunnersDaemonsOnce(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"GPU-a", "GPU-b", ".hidden"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "GPU-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &listRunner{names: []string{"GPU-b", "GPU-c", "../x"}}
	m := &MPS{Root: root, Runner: r}
	got := daemonNames(m.Daemons())
	if want := []string{"GPU-a", "GPU-b", "GPU-c"}; !slices.Equal(got, want) {
		t.Errorf("Daemons = %v, want %v (directories and the runner's, once each, valid names only)", got, want)
	}
	for _, d := range m.Daemons() {
		if d.Dir != filepath.Join(root, d.DeviceUUID) {
			t.Errorf("daemon %s in %s, want under the root", d.DeviceUUID, d.Dir)
		}
	}
	// The runner cannot list (the API server is away): directories still count.
	r.listErr = errors.New("unavailable")
	if got := daemonNames(m.Daemons()); !slices.Equal(got, []string{"GPU-a", "GPU-b"}) {
		t.Errorf("Daemons without the runner's list = %v", got)
	}
	// No root yet: only the runner's.
	r.listErr = nil
	m.Root = filepath.Join(root, "missing")
	if got := daemonNames(m.Daemons()); !slices.Equal(got, []string{"GPU-b", "GPU-c"}) {
		t.Errorf("Daemons without a root = %v", got)
	}
}

func TestPIDFromThePIDFile(t *testing.T) {
	m := &MPS{Root: t.TempDir(), Runner: &listRunner{}}
	d := m.Daemon("GPU-a")
	if _, ok := m.PID(d); ok {
		t.Error("a PID without a pid file")
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "x", "0", "-5"} {
		if err := os.WriteFile(d.PIDFile(), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if pid, ok := m.PID(d); ok || pid != 0 {
			t.Errorf("pid file %q: PID %d, %v", bad, pid, ok)
		}
	}
	if err := os.WriteFile(d.PIDFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, ok := m.PID(d); !ok || pid != os.Getpid() {
		t.Errorf("PID of this running process: %d, %v", pid, ok)
	}
	// The largest PID Linux hands out is below 2^22: this one cannot run.
	if err := os.WriteFile(d.PIDFile(), []byte("4194305"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, ok := m.PID(d); ok || pid != 4194305 {
		t.Errorf("PID of a process that does not run: %d, %v; want the number and false", pid, ok)
	}
}

// A client gets its claim's limits, the pipe directory read-only (it
// connects, but cannot rename or replace the daemon's sockets) and
// /dev/shm, and no log directory: only the control daemon and its servers
// use CUDA_MPS_LOG_DIRECTORY (NVIDIA MPS documentation, "Appendix:
// Logging"), and a client that could write there could plant a link for
// the daemon, which runs as root, to open.
func TestClientEditsCarryEachClaimsLimits(t *testing.T) {
	d := (&MPS{Root: "/var/lib/gdra/mps"}).Daemon("GPU-a")
	plain := ClientEdits(d, Settings{})
	if want := []string{"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"}; !slices.Equal(plain.Env, want) {
		t.Errorf("env without limits %v, want %v", plain.Env, want)
	}
	limited := ClientEdits(d, Settings{ActiveThreadPercentage: 30, PinnedMemoryBytes: 5<<30 + 1})
	for _, want := range []string{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=5120M"} {
		if !slices.Contains(limited.Env, want) {
			t.Errorf("env %v lacks %s", limited.Env, want)
		}
	}
	for _, e := range limited.Env {
		if strings.HasPrefix(e, "CUDA_MPS_LOG_DIRECTORY=") {
			t.Errorf("a client gets %s; only the control daemon logs", e)
		}
	}
	want := map[string]struct {
		host string
		mode string
	}{
		ContainerPipeDir: {d.PipeDir(), "ro"},
		ContainerShmDir:  {d.ShmDir(), "rw"},
	}
	if len(limited.Mounts) != len(want) {
		t.Errorf("%d mounts, want %d (no log directory)", len(limited.Mounts), len(want))
	}
	for _, m := range limited.Mounts {
		w, ok := want[m.ContainerPath]
		if !ok {
			t.Errorf("unexpected mount %s from %s", m.ContainerPath, m.HostPath)
			continue
		}
		if m.HostPath != w.host {
			t.Errorf("%s mounted from %q, want %s", m.ContainerPath, m.HostPath, w.host)
		}
		for _, o := range []string{"bind", w.mode, "nosuid", "nodev", "noexec"} {
			if !slices.Contains(m.Options, o) {
				t.Errorf("mount %s options %v lack %s", m.ContainerPath, m.Options, o)
			}
		}
		if w.mode == "ro" && slices.Contains(m.Options, "rw") {
			t.Errorf("mount %s options %v: both ro and rw", m.ContainerPath, m.Options)
		}
	}
}

func TestTimeSliceValue(t *testing.T) {
	for in, want := range map[configapi.TimeSliceInterval]int{
		"": 0, configapi.DefaultTimeSlice: 0, configapi.ShortTimeSlice: 1, configapi.MediumTimeSlice: 2, configapi.LongTimeSlice: 3,
	} {
		if got, err := TimeSliceValue(in); err != nil || got != want {
			t.Errorf("TimeSliceValue(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := TimeSliceValue("short"); err == nil || !strings.Contains(err.Error(), `"short"`) {
		t.Errorf("a misspelt interval: %v, want an error quoting it", err)
	}
}
