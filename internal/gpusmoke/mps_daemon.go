// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// The smoke container step's MPS control daemons: what the plugin's
// daemon pods do (sharing.PodRunner.Pod), done on the host without a
// cluster. For the smoke only; the plugin runs daemons in pods.

package gpusmoke

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// Where the daemon finds its directories inside the driver root: a daemon
// pod's (sharing.PodRunner.Pod passes --pipe-dir=/tmp/pipe and
// --log-dir=/tmp/log, with the daemon's directory mounted at the root's
// /tmp and its /dev/shm volume at the root's /dev/shm).
const (
	daemonRootTmp = "/tmp"
	daemonRootShm = "/dev/shm"
)

var daemonRootDirs = sharing.MPSDirs{Pipe: daemonRootTmp + "/pipe", Log: daemonRootTmp + "/log"}

// hostMPSRunner is a sharing.Runner that runs each daemon as a child
// process, `gpudra smoke mps-daemon`, in a mount namespace of its own.
// There, like a daemon pod, it mounts the daemon's directory (Daemon.Dir)
// at the driver root's /tmp and the daemon's shm directory at the root's
// /dev/shm, and runs sharing.DaemonProgram: nvidia-cuda-mps-control -f
// chrooted into the driver root, stopped with `quit`. The MPS server the
// control daemon starts shares the namespace, so it makes its shared
// memory files in Daemon.ShmDir(), which the clients' CDI spec mounts at
// their /dev/shm; the host's /tmp and /dev/shm are not touched.
type hostMPSRunner struct {
	// exe is this program (re-run as `smoke mps-daemon`), driverRoot
	// the root the daemon is chrooted into, logDir where each daemon's
	// output goes (<uuid>.log; it outlives Daemon.Dir, which Stop removes).
	exe, driverRoot, logDir string

	mu      sync.Mutex
	daemons map[string]*hostDaemon
}

// hostDaemon is one daemon child.
type hostDaemon struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the child's exit, once done
	// mountNS is the child's mount namespace (/proc/<pid>/ns/mnt), which
	// nvidia-cuda-mps-control and its servers inherit.
	mountNS string
	// controlPID is nvidia-cuda-mps-control's, read at Stop.
	controlPID int
	stopped    bool
}

var _ sharing.Runner = (*hostMPSRunner)(nil)

func newHostMPSRunner(driverRoot, logDir string) (*hostMPSRunner, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return &hostMPSRunner{exe: exe, driverRoot: driverRoot, logDir: logDir, daemons: map[string]*hostDaemon{}}, nil
}

// LogFile is where the daemon of a device logs (the control daemon logs
// to its stdout with -f).
func (r *hostMPSRunner) LogFile(uuid string) string { return filepath.Join(r.logDir, uuid+".log") }

// Start implements sharing.Runner.
func (r *hostMPSRunner) Start(_ context.Context, d *sharing.Daemon) error {
	for _, dir := range []string{daemonRootTmp, daemonRootShm} {
		if fi, err := os.Stat(filepath.Join(r.driverRoot, dir)); err != nil || !fi.IsDir() {
			return fmt.Errorf("driver root %s has no %s directory to mount the daemon's on (a host's root has both): %v", r.driverRoot, dir, err)
		}
	}
	log, err := os.OpenFile(r.LogFile(d.DeviceUUID), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(r.exe, "smoke", "mps-daemon", "--device", d.DeviceUUID, "--dir", d.Dir, "--driver-root", r.driverRoot)
	cmd.Stdout, cmd.Stderr = log, log
	// A mount namespace of its own (Go marks / private in it first, as
	// unshare(1) does), and SIGTERM, its orderly stop, should this
	// process die first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGTERM, Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s smoke mps-daemon: %w", r.exe, err)
	}
	h := &hostDaemon{cmd: cmd, done: make(chan struct{})}
	// The namespace is the child's from before its exec.
	h.mountNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid))
	go func() { h.err = cmd.Wait(); close(h.done) }()
	r.mu.Lock()
	r.daemons[d.DeviceUUID] = h
	r.mu.Unlock()
	return nil
}

func (r *hostMPSRunner) get(uuid string) *hostDaemon {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.daemons[uuid]
}

func (h *hostDaemon) running() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// Running implements sharing.Runner.
func (r *hostMPSRunner) Running(_ context.Context, d *sharing.Daemon) (bool, error) {
	h := r.get(d.DeviceUUID)
	return h != nil && h.running(), nil
}

// Stop implements sharing.Runner: SIGTERM, on which DaemonProgram sends
// `quit` and waits for the control daemon to exit; SIGKILL after 30s.
func (r *hostMPSRunner) Stop(ctx context.Context, d *sharing.Daemon) error {
	h := r.get(d.DeviceUUID)
	if h == nil || !h.running() {
		return nil
	}
	if data, err := os.ReadFile(d.PIDFile()); err == nil {
		h.controlPID, _ = strconv.Atoi(strings.TrimSpace(string(data)))
	}
	h.stopped = true
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
		return nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	_ = h.cmd.Process.Kill()
	<-h.done
	return fmt.Errorf("the MPS daemon of %s did not stop in time on SIGTERM; killed it", d.DeviceUUID)
}

// List implements sharing.Runner.
func (r *hostMPSRunner) List(context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for uuid, h := range r.daemons {
		if h.running() {
			out = append(out, uuid)
		}
	}
	return out, nil
}

// stopReport says how the daemon of uuid ended: its exit, whether it got
// `quit`, and the processes still in its mount namespace (none, once the
// control daemon and its servers are gone).
func (r *hostMPSRunner) stopReport(uuid string) (ok bool, detail string) {
	h := r.get(uuid)
	if h == nil {
		return false, "no daemon was started"
	}
	if h.running() {
		return false, "still running"
	}
	log, _ := os.ReadFile(r.LogFile(uuid))
	quit := strings.Contains(string(log), "Cmd:quit")
	// An MPS server may end a moment after its control daemon.
	left := processesIn(h.mountNS)
	for deadline := time.Now().Add(5 * time.Second); len(left) != 0 && time.Now().Before(deadline); left = processesIn(h.mountNS) {
		time.Sleep(50 * time.Millisecond)
	}
	ok = h.stopped && h.err == nil && quit && len(left) == 0
	return ok, fmt.Sprintf("exit %v, nvidia-cuda-mps-control pid %d logged Cmd:quit: %t, processes left in the daemon's mount namespace: %v",
		exitString(h.err), h.controlPID, quit, left)
}

func exitString(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}

// processesIn lists the processes of a mount namespace ("pid name").
func processesIn(ns string) []string {
	if ns == "" {
		return []string{"unknown: the daemon's mount namespace was not read"}
	}
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if got, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err != nil || got != ns {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.TrimSpace(string(comm))))
	}
	return out
}

// newSmokeMPSDaemonCommand is the child hostMPSRunner runs.
func newSmokeMPSDaemonCommand() *cobra.Command {
	var dir, root, uuid string
	cmd := &cobra.Command{
		Use:    "mps-daemon",
		Short:  "One device's MPS control daemon as a daemon pod runs it (the smoke container step starts it in a mount namespace of its own)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			if err := mountDaemonDirs(dir, root); err != nil {
				return err
			}
			// The pid file goes to the daemon's directory, which is now
			// the root's /tmp (its own path may lie under it).
			p := sharing.DaemonProgram{DeviceUUID: uuid, Dir: filepath.Join(root, daemonRootTmp), DriverRoot: root, Dirs: daemonRootDirs, Log: os.Stdout}
			return p.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&uuid, "device", "", "UUID of the GPU or MIG device.")
	cmd.Flags().StringVar(&dir, "dir", "", "The daemon's directory (sharing.Daemon.Dir).")
	cmd.Flags().StringVar(&root, "driver-root", "/", "Driver root to chroot into.")
	return cmd
}

// mountDaemonDirs mounts, in this process's own mount namespace, dir/shm
// at root's /dev/shm and dir at root's /tmp, as a daemon pod's volumes
// are. The shm mount comes first: with root "/", dir may lie under /tmp,
// which the second mount covers. It refuses to run in its parent's mount
// namespace, where the mounts would cover the host's directories.
func mountDaemonDirs(dir, root string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return fmt.Errorf("--dir %q: give the daemon's directory as an absolute path", dir)
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	if parent, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid())); err != nil || parent == own {
		return errors.New("smoke mps-daemon must run in a mount namespace of its own (gpudra smoke container starts it so); refusing to mount over the host's /tmp and /dev/shm")
	}
	for _, m := range []struct{ src, dst string }{
		{filepath.Join(dir, "shm"), filepath.Join(root, daemonRootShm)},
		{dir, filepath.Join(root, daemonRootTmp)},
	} {
		if err := syscall.Mount(m.src, m.dst, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mount %s at %s: %w", m.src, m.dst, err)
		}
	}
	return nil
}
