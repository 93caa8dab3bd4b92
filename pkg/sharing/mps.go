// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// Container paths where MPS clients find their daemon. The pipe directory
// and /dev/shm are what NVIDIA's DRA driver gives its MPS clients too
// (k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin/sharing.go, GetCDIContainerEdits):
// clients and the MPS server exchange memory through /dev/shm, so both must
// see the same one. ContainerLogDir is where a daemon pod's control daemon
// logs (DefaultMPSDirs); clients get no log directory (ClientEdits).
const (
	ContainerPipeDir = "/tmp/nvidia-mps"
	ContainerLogDir  = "/var/log/nvidia-mps"
	ContainerShmDir  = "/dev/shm"
)

// Runner runs MPS control daemons: as pods of their own (PodRunner, what
// the plugin does in a cluster, so that daemons outlive the plugin's
// container) or as local processes (ProcessRunner, for tests and for a
// plugin run outside Kubernetes).
type Runner interface {
	// Start starts the daemon of d, which does not run.
	Start(ctx context.Context, d *Daemon) error
	// Running reports whether d's daemon exists and has not ended.
	Running(ctx context.Context, d *Daemon) (bool, error)
	// Stop ends the daemon (NVIDIA's way: `quit` on its control pipe) and
	// returns once it is gone. Stopping one that does not run is no error.
	Stop(ctx context.Context, d *Daemon) error
	// List names the devices this runner has daemons for on this node.
	List(ctx context.Context) ([]string, error)
}

// Daemon is the MPS control daemon of one device (a GPU or a MIG device).
type Daemon struct {
	DeviceUUID string
	Dir        string // <state>/mps/<uuid>: pipe/, log/, shm, daemon.pid, namespace
	// Namespace is the namespace of the claim that asks for the daemon.
	// Ensure refuses it when the daemon serves another namespace's claims,
	// unless MPS.ShareAcrossNamespaces; empty skips that check.
	Namespace string
	// Defaults are the limits of the claim that starts the daemon, which a
	// PodRunner with DaemonDefaults sets as the daemon's defaults
	// (set_default_active_thread_percentage,
	// set_default_device_pinned_mem_limit); each client carries its own
	// claim's limits in its environment either way (ClientEdits).
	Defaults Settings
}

func (d *Daemon) PipeDir() string { return filepath.Join(d.Dir, "pipe") }
func (d *Daemon) LogDir() string  { return filepath.Join(d.Dir, "log") }
func (d *Daemon) ShmDir() string  { return filepath.Join(d.Dir, "shm") }

// PIDFile holds the daemon's process ID as the host sees it, written by
// whatever runs the daemon.
func (d *Daemon) PIDFile() string { return filepath.Join(d.Dir, "daemon.pid") }

// NamespaceFile holds the namespace whose claims the daemon serves: the
// namespace of the claim that started it, kept until the daemon's last
// claim is unprepared (Stop removes Dir).
func (d *Daemon) NamespaceFile() string { return filepath.Join(d.Dir, "namespace") }

// ControlPipe exists once the control daemon accepts commands and clients.
func (d *Daemon) ControlPipe() string { return filepath.Join(d.PipeDir(), "control") }

// MPS manages the daemons under one state directory.
type MPS struct {
	Root   string
	Runner Runner
	// ReadyTimeout bounds the wait for a new daemon's control pipe; 60s
	// when zero (a daemon pod may need its image started first).
	ReadyTimeout time.Duration
	// ShareAcrossNamespaces lets claims of different namespaces use one
	// device's daemon (--mps-share-across-namespaces, chart value
	// sharing.mps.shareAcrossNamespaces). Off, a claim of a namespace other
	// than the one the daemon serves is refused at prepare: MPS clients of
	// one server are not isolated from each other (they share its
	// /dev/shm and its control pipe), so a daemon is a trust boundary.
	ShareAcrossNamespaces bool
}

// Modes of a daemon's directories. Clients never traverse Dir: the
// container runtime (root, on the host) bind-mounts pipe/ and shm into
// them. The MPS server, though, runs with the user ID of its clients
// (NVIDIA's nvidia-cuda-mps-control(1): "the control daemon launches an
// MPS server with the same user id (UID) as that of the requesting client
// process"), inside the daemon pod where Dir is its /tmp (PodRunner), so
// Dir grants others search, not read or write; pipe/ is searched and its
// sockets reached by clients and servers of any user ID, and is read-only
// in clients (ClientEdits); log/ is written by the control daemon (root)
// alone and mounted in no client.
const (
	daemonDirMode os.FileMode = 0o711
	pipeDirMode   os.FileMode = 0o755
	logDirMode    os.FileMode = 0o700
	// shmDirMode is that of a plain shm directory, made only for runners
	// that provide none of their own (ProcessRunner: tests and a plugin
	// run outside the chart), writable by root clients only: no file the
	// plugin makes is writable by others. A PodRunner's /dev/shm is the
	// kubelet's emptyDir, writable by clients of any user ID.
	shmDirMode os.FileMode = 0o755
)

// CrossNamespaceFlag and CrossNamespaceValue name the setting that lets
// namespaces share a daemon, for errors.
const (
	CrossNamespaceFlag  = "--mps-share-across-namespaces"
	CrossNamespaceValue = "sharing.mps.shareAcrossNamespaces"
)

// Daemon returns the daemon handle of a device. The UUID may come from a
// file on disk: Ensure and Stop refuse one that is not a single, plain
// path element, so that no record can point them outside Root.
func (m *MPS) Daemon(uuid string) *Daemon {
	return &Daemon{DeviceUUID: uuid, Dir: filepath.Join(m.Root, uuid)}
}

var deviceUUIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// CheckDeviceUUID refuses a device UUID that is not a single, plain path
// element.
func CheckDeviceUUID(uuid string) error {
	if !deviceUUIDPattern.MatchString(uuid) || uuid == ".." {
		return fmt.Errorf("MPS daemon for device %q: not a valid device UUID", uuid)
	}
	return nil
}

func (m *MPS) check(d *Daemon) error {
	if err := CheckDeviceUUID(d.DeviceUUID); err != nil {
		return err
	}
	if d.Dir != filepath.Join(m.Root, d.DeviceUUID) {
		return fmt.Errorf("MPS daemon for device %q: directory %s is not under %s", d.DeviceUUID, d.Dir, m.Root)
	}
	return nil
}

// Daemons lists the daemons that exist on this node: a directory under
// Root or a daemon the runner has (a pod whose directory is gone).
func (m *MPS) Daemons() []*Daemon {
	seen := map[string]bool{}
	var out []*Daemon
	add := func(uuid string) {
		if d := m.Daemon(uuid); !seen[uuid] && m.check(d) == nil {
			seen[uuid] = true
			out = append(out, d)
		}
	}
	entries, _ := os.ReadDir(m.Root)
	for _, e := range entries {
		if e.IsDir() {
			add(e.Name())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if names, err := m.Runner.List(ctx); err == nil {
		for _, n := range names {
			add(n)
		}
	}
	return out
}

// PID returns the daemon's host process ID from its pid file when that
// process runs (tests and diagnostics; Running is the runner's word).
func (m *MPS) PID(d *Daemon) (int, bool) {
	data, err := os.ReadFile(d.PIDFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, processRuns(pid)
}

// processRuns: signal 0 checks existence; a zombie left by a dead parent
// is gone too.
func processRuns(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(stat), ") Z ") {
		return false
	}
	return true
}

// Ensure starts the daemon unless it already runs (for example after a
// plugin restart), and waits until its control pipe exists. Limits are not
// set on the daemon: they ride on each client's environment (ClientEdits),
// so claims sharing one daemon keep their own.
func (m *MPS) Ensure(d *Daemon) error {
	if err := m.check(d); err != nil {
		return err
	}
	timeout := m.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	running, err := m.Runner.Running(ctx, d)
	if err != nil {
		return fmt.Errorf("MPS daemon for %s: %w", d.DeviceUUID, err)
	}
	if err := m.claimNamespace(d); err != nil {
		return err
	}
	if !running {
		// Whatever a dead daemon left in its pipe directory is stale;
		// a new one creates its pipes afresh.
		_ = os.RemoveAll(d.PipeDir())
		if err := makeDirs(d); err != nil {
			return fmt.Errorf("MPS daemon dir: %w", err)
		}
		if err := m.Runner.Start(ctx, d); err != nil {
			return fmt.Errorf("start MPS control daemon for %s: %w", d.DeviceUUID, err)
		}
	}
	return waitForFile(ctx, d.ControlPipe(), fmt.Sprintf("MPS control daemon for %s", d.DeviceUUID))
}

// makeDirs makes the daemon's directories with their modes (a directory
// left by an earlier version, made 0755, gets them too). The shm directory
// is made only when nothing is there: a PodRunner replaces it with a link
// to its daemon pod's size-limited tmpfs.
func makeDirs(d *Daemon) error {
	for _, dm := range []struct {
		dir  string
		mode os.FileMode
	}{{d.Dir, daemonDirMode}, {d.PipeDir(), pipeDirMode}, {d.LogDir(), logDirMode}} {
		if err := os.MkdirAll(dm.dir, dm.mode); err != nil {
			return err
		}
		// MkdirAll's mode is filtered by the umask, and an existing
		// directory keeps its mode.
		if err := os.Chmod(dm.dir, dm.mode); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(d.ShmDir()); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(d.ShmDir(), shmDirMode); err != nil {
			return err
		}
		return os.Chmod(d.ShmDir(), shmDirMode)
	}
	return nil
}

// claimNamespace records d.Namespace as the namespace the daemon serves,
// or refuses it when the daemon already serves another namespace and
// namespaces may not share daemons. The record outlives a daemon that
// dies (its claims are still prepared) and goes with Dir at Stop. A
// daemon directory without a record (made by an earlier version) takes
// the namespace of the next claim.
func (m *MPS) claimNamespace(d *Daemon) error {
	if d.Namespace == "" {
		return nil
	}
	data, err := os.ReadFile(d.NamespaceFile())
	if err == nil {
		serves := strings.TrimSpace(string(data))
		if serves == d.Namespace || serves == "" || m.ShareAcrossNamespaces {
			return nil
		}
		return fmt.Errorf("MPS daemon for device %s serves claims of namespace %q; a claim of namespace %q may not share it, "+
			"because MPS clients of one server are not isolated from each other (they share its /dev/shm and control pipe). "+
			"Use a device no other namespace shares, or let namespaces share MPS daemons with %s (chart value %s=true)",
			d.DeviceUUID, serves, d.Namespace, CrossNamespaceFlag, CrossNamespaceValue)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("MPS daemon for device %s: read its namespace: %w", d.DeviceUUID, err)
	}
	if err := os.MkdirAll(d.Dir, daemonDirMode); err != nil {
		return fmt.Errorf("MPS daemon dir: %w", err)
	}
	tmp := d.NamespaceFile() + ".tmp"
	if err := os.WriteFile(tmp, []byte(d.Namespace+"\n"), 0o600); err != nil {
		return fmt.Errorf("MPS daemon for device %s: record its namespace: %w", d.DeviceUUID, err)
	}
	if err := os.Rename(tmp, d.NamespaceFile()); err != nil {
		return fmt.Errorf("MPS daemon for device %s: record its namespace: %w", d.DeviceUUID, err)
	}
	return nil
}

// waitForFile waits for a path to exist. NVIDIA's driver likewise waits for
// its daemon to report ready before it hands clients the pipe.
func waitForFile(ctx context.Context, path, what string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: control pipe %s did not appear: %w; see the daemon's log in %s", what, path, ctx.Err(), filepath.Join(filepath.Dir(filepath.Dir(path)), "log"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop ends the daemon and removes its directory. Stopping a daemon that
// does not run is not an error.
func (m *MPS) Stop(d *Daemon) error {
	if err := m.check(d); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.Runner.Stop(ctx, d); err != nil {
		return fmt.Errorf("stop MPS control daemon for %s: %w", d.DeviceUUID, err)
	}
	// ENOTDIR: the root is not even a directory, so no daemon dir exists.
	if err := os.RemoveAll(d.Dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	return nil
}

// ClientEdits are what a container using the daemon needs: its pipe
// directory and /dev/shm, and this claim's own client limits. MPS applies
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT
// from a client's environment when that client starts (NVIDIA MPS
// documentation, "Environment Variables"), so two claims on one daemon
// each keep theirs; set_default_* on the daemon would be one value for all
// of them.
//
// What a client does not get:
//   - The log directory. NVIDIA's MPS documentation ("Appendix: Logging",
//     https://docs.nvidia.com/deploy/mps/ ) says the control daemon writes
//     control.log and each server server.log there, and that
//     CUDA_MPS_LOG_DIRECTORY "should be set in the MPS control daemon's
//     environment and is automatically inherited by any MPS servers it
//     launches": clients neither read nor write it. NVIDIA's device plugin
//     gives its MPS clients the pipe directory and /dev/shm only
//     (k8s-device-plugin internal/plugin/server.go, updateResponseForMPS).
//     A client that could write there could plant control.log -> /etc/shadow
//     for the daemon, which runs as root, to open.
//   - A writable pipe directory. A client only connect(2)s to the sockets, and
//     opens the named pipes, that its control daemon made there; the directory is mounted
//     read-only so that no client can rename, remove or replace them (a
//     fake daemon, or a denial of service for every other client). Linux
//     refuses writes on a read-only mount with EROFS only for regular
//     files, directories and symlinks: sb_permission() in fs/namei.c
//     checks IS_RDONLY for S_ISREG, S_ISDIR and S_ISLNK only, so opening a
//     socket or FIFO on a read-only mount for writing still works, while
//     creating, renaming or unlinking anything in the directory fails.
//
// /dev/shm is writable: clients and their server exchange memory through
// it. With a PodRunner, it is the daemon pod's size-limited tmpfs (see
// PodRunner.ShmSize), which clients of other namespaces do not share
// unless MPS.ShareAcrossNamespaces.
func ClientEdits(d *Daemon, s Settings) cdispec.ContainerEdits {
	env := []string{"CUDA_MPS_PIPE_DIRECTORY=" + ContainerPipeDir}
	if s.ActiveThreadPercentage > 0 {
		env = append(env, fmt.Sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", s.ActiveThreadPercentage))
	}
	if s.PinnedMemoryBytes > 0 {
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0="+MiB(s.PinnedMemoryBytes))
	}
	return cdispec.ContainerEdits{
		Env: env,
		Mounts: []*cdispec.Mount{
			{HostPath: d.PipeDir(), ContainerPath: ContainerPipeDir, Options: []string{"ro", "nosuid", "nodev", "noexec", "bind"}},
			// The host path may be a link to the daemon pod's tmpfs; the
			// runtime resolves it when it creates the container.
			{HostPath: d.ShmDir(), ContainerPath: ContainerShmDir, Options: []string{"rw", "nosuid", "nodev", "noexec", "bind"}},
		},
	}
}
