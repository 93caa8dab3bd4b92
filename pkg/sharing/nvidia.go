// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// NvidiaTools runs NVIDIA's own tools (nvidia-smi, nvidia-cuda-mps-control)
// chrooted into the driver root, as NVIDIA's DRA driver runs its MPS
// control daemon (k8s-dra-driver-gpu templates/mps-control-daemon.tmpl.yaml:
// `chroot /driver-root ...`) and as its device plugin documents for MPS
// (docs/mps: "we run nvidia-cuda-mps-control after a chroot /driver-root to
// ensure that nvidia-cuda-mps-server can be found"). Inside the root the
// tool uses that root's own loader, ld.so.cache and libc, whatever the
// architecture, so nothing of this image (a different libc) or of a
// hard-coded library path leaks in. chroot needs CAP_SYS_CHROOT: the
// plugin's container is privileged on real GPUs, and so is a daemon pod.
type NvidiaTools struct {
	Root string // driver root as this process sees it, e.g. /driver-root; "" or "/" for no chroot
}

// toolPath is the PATH a tool gets: the standard one, which the control
// daemon also uses to find nvidia-cuda-mps-server.
const toolPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// toolDirs are searched, inside the root, for a tool.
var toolDirs = []string{"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", "/usr/local/nvidia/bin"}

func (d NvidiaTools) root() string {
	if d.Root == "" {
		return "/"
	}
	return d.Root
}

// Tool returns the command that runs one of the driver's tools inside the
// root with only PATH and env in its environment.
func (d NvidiaTools) Tool(ctx context.Context, name string, env []string, args ...string) (*exec.Cmd, error) {
	root := d.root()
	for _, dir := range toolDirs {
		// Lstat: an absolute symlink resolves inside the root, not here.
		if _, err := os.Lstat(filepath.Join(root, dir, name)); err != nil {
			continue
		}
		cmd := exec.CommandContext(ctx, path.Join(dir, name), args...)
		cmd.WaitDelay = time.Second
		if root != "/" {
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		}
		cmd.Dir = "/"
		cmd.Env = append([]string{toolPath}, env...)
		return cmd, nil
	}
	return nil, fmt.Errorf("%s not found in the driver root %s (looked in %s); set --driver-root (chart value driverRoot) to where the NVIDIA driver is installed", name, root, strings.Join(toolDirs, ", "))
}

// SetTimeSlice implements TimeSlicer with nvidia-smi compute-policy, in the
// form NVIDIA's DRA driver uses (k8s-dra-driver-gpu
// cmd/gpu-kubelet-plugin/nvlib.go, setTimeSlice:
// `nvidia-smi compute-policy -i <uuid> --set-timeslice <0-3>`).
func (d NvidiaTools) SetTimeSlice(uuid string, interval configapi.TimeSliceInterval) error {
	v, err := TimeSliceValue(interval)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, err := d.Tool(ctx, "nvidia-smi", nil, "compute-policy", "-i", uuid, "--set-timeslice", strconv.Itoa(v))
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nvidia-smi compute-policy -i %s --set-timeslice %d: %w: %s", uuid, v, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// MPSDirs are where, inside the driver root, a control daemon keeps its
// pipes and logs: ContainerPipeDir and ContainerLogDir in a daemon pod,
// which mounts the daemon's own directories there.
type MPSDirs struct{ Pipe, Log string }

// DefaultMPSDirs are a daemon pod's.
var DefaultMPSDirs = MPSDirs{Pipe: ContainerPipeDir, Log: ContainerLogDir}

// mpsEnv is the environment of the control daemon and of its control
// commands: its device and its pipe and log directories.
func mpsEnv(uuid string, dirs MPSDirs) []string {
	env := []string{"CUDA_MPS_PIPE_DIRECTORY=" + dirs.Pipe, "CUDA_MPS_LOG_DIRECTORY=" + dirs.Log}
	if uuid != "" {
		env = append(env, "CUDA_VISIBLE_DEVICES="+uuid)
	}
	return env
}

// DaemonCommand is nvidia-cuda-mps-control in the foreground (-f) for one
// device. The compute mode is left alone: see DaemonProgram.
func (d NvidiaTools) DaemonCommand(ctx context.Context, uuid string, dirs MPSDirs) (*exec.Cmd, error) {
	return d.Tool(ctx, "nvidia-cuda-mps-control", mpsEnv(uuid, dirs), "-f")
}

// Quit asks the control daemon to shut down its servers and exit: NVIDIA's
// documented way to stop MPS (`echo quit | nvidia-cuda-mps-control`, MPS
// documentation, "Starting and Stopping MPS on Linux").
func (d NvidiaTools) Quit(ctx context.Context, dirs MPSDirs) error {
	cmd, err := d.Tool(ctx, "nvidia-cuda-mps-control", mpsEnv("", dirs))
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader("quit\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nvidia-cuda-mps-control quit: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Control sends one command to the control daemon of dirs (NVIDIA's
// `echo <command> | nvidia-cuda-mps-control`) and returns its answer.
func (d NvidiaTools) Control(ctx context.Context, dirs MPSDirs, command string) (string, error) {
	cmd, err := d.Tool(ctx, "nvidia-cuda-mps-control", mpsEnv("", dirs))
	if err != nil {
		return "", err
	}
	cmd.Stdin = strings.NewReader(command + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nvidia-cuda-mps-control %s: %w: %s", command, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// DefaultCommands are the control commands that make a daemon's defaults
// the given limits: the thread percentage, and the pinned memory limit of
// the client's device 0 (a client sees only its one device).
func DefaultCommands(s Settings) []string {
	var cmds []string
	if s.ActiveThreadPercentage > 0 {
		cmds = append(cmds, fmt.Sprintf("set_default_active_thread_percentage %d", s.ActiveThreadPercentage))
	}
	if s.PinnedMemoryBytes > 0 {
		cmds = append(cmds, "set_default_device_pinned_mem_limit 0 "+MiB(s.PinnedMemoryBytes))
	}
	return cmds
}
