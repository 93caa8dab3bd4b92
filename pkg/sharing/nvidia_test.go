// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// A fake driver root: nvidia-smi and nvidia-cuda-mps-control are a static
// recorder (testdata/recorder) that logs argv, environment, working
// directory and the root it sees, so these tests cover every call the real
// NvidiaTools makes, chroot included.

const fakeUUID = "GPU-12345678-1234-1234-1234-123456789abc"

var (
	recorderOnce sync.Once
	recorderBin  string
	recorderErr  error
)

func buildRecorder(t *testing.T) string {
	t.Helper()
	recorderOnce.Do(func() {
		dir, err := os.MkdirTemp("", "recorder-")
		if err != nil {
			recorderErr = err
			return
		}
		recorderBin = filepath.Join(dir, "recorder")
		cmd := exec.Command("go", "build", "-o", recorderBin, "./testdata/recorder")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			recorderErr = err
			recorderBin = string(out)
		}
	})
	if recorderErr != nil {
		t.Fatalf("build the recorder: %v\n%s", recorderErr, recorderBin)
	}
	return recorderBin
}

// fakeDriverRoot returns a driver root holding the recorder as both tools,
// and the directories a daemon pod mounts into it.
func fakeDriverRoot(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	bin := buildRecorder(t)
	root := t.TempDir()
	for _, dir := range []string{"usr/bin", ContainerPipeDir, ContainerLogDir, ContainerShmDir} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"nvidia-smi", "nvidia-cuda-mps-control"} {
		if err := os.WriteFile(filepath.Join(root, "usr/bin", tool), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "fake-driver-root"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

type record struct {
	Tool  string   `json:"tool"`
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Cwd   string   `json:"cwd"`
	Root  string   `json:"root"`
	Stdin string   `json:"stdin"`
}

func records(t *testing.T, root string) []record {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// checkRanInRoot: chrooted (the root it saw is the fake one), from /, with
// the standard PATH and no library path of this process's.
func checkRanInRoot(t *testing.T, r record, root string, env ...string) {
	t.Helper()
	if r.Root != root || r.Cwd != "/" {
		t.Errorf("%s ran with root %q in %q, want chrooted into %s in /", r.Tool, r.Root, r.Cwd, root)
	}
	want := append([]string{toolPath}, env...)
	got := slices.Clone(r.Env)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s environment %v, want exactly %v", r.Tool, r.Env, want)
	}
}

func TestSetTimeSliceRunsNvidiaSmiInTheDriverRoot(t *testing.T) {
	root := fakeDriverRoot(t)
	d := NvidiaTools{Root: root}
	for i, iv := range []configapi.TimeSliceInterval{configapi.DefaultTimeSlice, configapi.ShortTimeSlice, configapi.MediumTimeSlice, configapi.LongTimeSlice} {
		if err := d.SetTimeSlice(fakeUUID, iv); err != nil {
			t.Fatal(err)
		}
		r := records(t, root)[i]
		want := []string{"compute-policy", "-i", fakeUUID, "--set-timeslice", strconv.Itoa(i)}
		if r.Tool != "nvidia-smi" || !slices.Equal(r.Args, want) {
			t.Errorf("%s: %s %v, want nvidia-smi %v", iv, r.Tool, r.Args, want)
		}
		checkRanInRoot(t, r, root)
	}
	// nvidia-smi's failure reaches the caller with its output.
	if err := os.WriteFile(filepath.Join(root, "fail-nvidia-smi"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := d.SetTimeSlice(fakeUUID, configapi.LongTimeSlice)
	if err == nil || !strings.Contains(err.Error(), "Insufficient Permissions") || !strings.Contains(err.Error(), fakeUUID) {
		t.Fatalf("failing nvidia-smi: %v", err)
	}
}

func TestToolMissingFromTheDriverRootNamesTheFix(t *testing.T) {
	_, err := NvidiaTools{Root: t.TempDir()}.Tool(context.Background(), "nvidia-smi", nil)
	if err == nil || !strings.Contains(err.Error(), "--driver-root") || !strings.Contains(err.Error(), "driverRoot") {
		t.Fatalf("missing tool: %v", err)
	}
}

// The daemon program starts nvidia-cuda-mps-control -f chrooted, for its
// device only, with the pipe and log directories where the pod mounts
// them; it stops it with `quit`, and sets no daemon-wide defaults unless
// given some (each claim's limits ride on its own clients' environment).
func TestDaemonProgramStartsAndQuitsTheControlDaemon(t *testing.T) {
	root := fakeDriverRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- DaemonProgram{DeviceUUID: fakeUUID, Dir: dir, DriverRoot: root}.Run(ctx) }()
	control := filepath.Join(root, ContainerPipeDir, "control")
	if err := waitForFile(context.Background(), control, "test"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "daemon.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	// The kernel's word on the daemon's root.
	if seen, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/root"); err != nil || seen != root {
		t.Fatalf("daemon pid %d has root %q (%v), want %s", pid, seen, err, root)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("orderly stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon program did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "daemon.pid")); !os.IsNotExist(err) {
		t.Error("pid file left behind")
	}
	recs := records(t, root)
	if len(recs) != 2 {
		t.Fatalf("tool calls %+v, want the daemon and quit", recs)
	}
	pipes := []string{"CUDA_MPS_PIPE_DIRECTORY=" + ContainerPipeDir, "CUDA_MPS_LOG_DIRECTORY=" + ContainerLogDir}
	if r := recs[0]; r.Tool != "nvidia-cuda-mps-control" || !slices.Equal(r.Args, []string{"-f"}) {
		t.Errorf("daemon call %s %v", r.Tool, r.Args)
	} else {
		checkRanInRoot(t, r, root, append(pipes, "CUDA_VISIBLE_DEVICES="+fakeUUID)...)
	}
	if r := recs[1]; r.Tool != "nvidia-cuda-mps-control" || len(r.Args) != 0 || r.Stdin != "quit\n" {
		t.Errorf("stop call %s %v with stdin %q, want `quit` on the control pipe", r.Tool, r.Args, r.Stdin)
	} else {
		checkRanInRoot(t, r, root, pipes...)
	}
}

func TestDaemonProgramFailsWhenTheDaemonDies(t *testing.T) {
	root := fakeDriverRoot(t)
	if err := os.WriteFile(filepath.Join(root, "crash-mps-control"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := DaemonProgram{DeviceUUID: fakeUUID, Dir: t.TempDir(), DriverRoot: root}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nvidia-cuda-mps-control exited") {
		t.Fatalf("a dying daemon: %v", err)
	}
}
