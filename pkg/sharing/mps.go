package sharing

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// Container paths where MPS clients find their daemon.
const (
	ContainerPipeDir = "/tmp/nvidia-mps"
	ContainerLogDir  = "/var/log/nvidia-mps"
)

// DaemonLauncher starts and stops one MPS control daemon process. The real
// one runs nvidia-cuda-mps-control from the driver root; the simulated one
// runs a stand-in with the same lifecycle.
type DaemonLauncher interface {
	// Command returns the daemon command for a device; it must stay in the
	// foreground (the MPS class manages detaching and the pid file).
	Command(d *Daemon) *exec.Cmd
	// Configure applies daemon-wide defaults once the daemon runs.
	Configure(d *Daemon, s Settings) error
}

// Daemon is the MPS control daemon of one device (a GPU or a MIG device).
type Daemon struct {
	DeviceUUID string
	Dir        string // <state>/mps/<uuid>: pipe/, log/, daemon.pid
}

func (d *Daemon) PipeDir() string { return filepath.Join(d.Dir, "pipe") }
func (d *Daemon) LogDir() string  { return filepath.Join(d.Dir, "log") }
func (d *Daemon) pidFile() string { return filepath.Join(d.Dir, "daemon.pid") }

// MPS manages the daemons under one state directory.
type MPS struct {
	Root     string
	Launcher DaemonLauncher
}

// Daemon returns the daemon handle of a device. The UUID may come from a
// file on disk: Ensure and Stop refuse one that is not a single, plain
// path element, so that no record can point them outside Root.
func (m *MPS) Daemon(uuid string) *Daemon {
	return &Daemon{DeviceUUID: uuid, Dir: filepath.Join(m.Root, uuid)}
}

var deviceUUIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (m *MPS) check(d *Daemon) error {
	if !deviceUUIDPattern.MatchString(d.DeviceUUID) || d.DeviceUUID == ".." || d.Dir != filepath.Join(m.Root, d.DeviceUUID) {
		return fmt.Errorf("MPS daemon for device %q: not a valid device UUID", d.DeviceUUID)
	}
	return nil
}

// Daemons lists the daemon directories under Root.
func (m *MPS) Daemons() []*Daemon {
	entries, _ := os.ReadDir(m.Root)
	var out []*Daemon
	for _, e := range entries {
		if d := m.Daemon(e.Name()); e.IsDir() && m.check(d) == nil {
			out = append(out, d)
		}
	}
	return out
}

// PID returns the daemon's process ID when it runs.
func (m *MPS) PID(d *Daemon) (int, bool) {
	data, err := os.ReadFile(d.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	// Signal 0 checks existence; a zombie left by a dead parent is gone too.
	if err := syscall.Kill(pid, 0); err != nil {
		return 0, false
	}
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(stat), ") Z ") {
		return 0, false
	}
	// The pid file may come from another PID namespace (an earlier plugin
	// container): only a process that runs with this daemon's directory in
	// its environment is this daemon.
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err != nil || !strings.Contains(string(env), d.Dir) {
		return 0, false
	}
	return pid, true
}

// Ensure starts the daemon unless it already runs (for example after a
// plugin restart: it runs in its own session and is found by its pid file),
// then applies the settings.
func (m *MPS) Ensure(d *Daemon, s Settings) error {
	if err := m.check(d); err != nil {
		return err
	}
	if _, running := m.PID(d); !running {
		if err := m.start(d); err != nil {
			return err
		}
	}
	return m.Launcher.Configure(d, s)
}

func (m *MPS) start(d *Daemon) error {
	for _, dir := range []string{d.PipeDir(), d.LogDir()} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("MPS daemon dir: %w", err)
		}
	}
	cmd := m.Launcher.Command(d)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive the plugin process
	cmd.Stdin = nil
	logf, err := os.OpenFile(filepath.Join(d.LogDir(), "daemon.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start MPS control daemon for %s: %w", d.DeviceUUID, err)
	}
	pid := cmd.Process.Pid
	// Reap it in the background if it dies while this process lives.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(d.pidFile(), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

// Stop ends the daemon and removes its directory. Stopping a daemon that
// does not run is not an error.
func (m *MPS) Stop(d *Daemon) error {
	if err := m.check(d); err != nil {
		return err
	}
	if pid, running := m.PID(d); running {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if _, still := m.PID(d); !still {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, still := m.PID(d); still {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// ENOTDIR: the root is not even a directory, so no daemon dir exists.
	if err := os.RemoveAll(d.Dir); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	return nil
}

// ClientEdits are what a container using the daemon needs: its pipe and
// log directories and the per-client limits, which MPS enforces for every
// client that starts with them.
func ClientEdits(d *Daemon, s Settings) cdispec.ContainerEdits {
	env := []string{
		"CUDA_MPS_PIPE_DIRECTORY=" + ContainerPipeDir,
		"CUDA_MPS_LOG_DIRECTORY=" + ContainerLogDir,
	}
	if s.ActiveThreadPercentage > 0 {
		env = append(env, fmt.Sprintf("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", s.ActiveThreadPercentage))
	}
	if s.PinnedMemoryBytes > 0 {
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0="+MiB(s.PinnedMemoryBytes))
	}
	return cdispec.ContainerEdits{
		Env: env,
		Mounts: []*cdispec.Mount{
			{HostPath: d.PipeDir(), ContainerPath: ContainerPipeDir, Options: []string{"rw", "nosuid", "nodev", "bind"}},
			{HostPath: d.LogDir(), ContainerPath: ContainerLogDir, Options: []string{"rw", "nosuid", "nodev", "bind"}},
		},
	}
}
