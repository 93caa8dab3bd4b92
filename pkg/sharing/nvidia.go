package sharing

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// Driver runs NVIDIA's own tools from the driver root for real GPUs.
type Driver struct {
	Root string // driver root as seen by the plugin, e.g. /driver-root
}

func (d Driver) bin(name string) string { return filepath.Join(d.Root, "usr", "bin", name) }

func (d Driver) env() []string {
	return []string{"LD_LIBRARY_PATH=" + filepath.Join(d.Root, "usr", "lib", "x86_64-linux-gnu") + ":" + filepath.Join(d.Root, "usr", "lib64")}
}

// SetTimeSlice implements TimeSlicer with nvidia-smi compute-policy.
func (d Driver) SetTimeSlice(uuid string, interval configapi.TimeSliceInterval) error {
	v, err := TimeSliceValue(interval)
	if err != nil {
		return err
	}
	cmd := exec.Command(d.bin("nvidia-smi"), "compute-policy", "-i", uuid, fmt.Sprintf("--set-timeslice=%d", v))
	cmd.Env = d.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nvidia-smi compute-policy --set-timeslice=%d on %s: %w: %s", v, uuid, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command implements DaemonLauncher: nvidia-cuda-mps-control in the
// foreground (-f), bound to one device.
func (d Driver) Command(dm *Daemon) *exec.Cmd {
	cmd := exec.Command(d.bin("nvidia-cuda-mps-control"), "-f")
	cmd.Env = append(d.env(),
		"CUDA_VISIBLE_DEVICES="+dm.DeviceUUID,
		"CUDA_MPS_PIPE_DIRECTORY="+dm.PipeDir(),
		"CUDA_MPS_LOG_DIRECTORY="+dm.LogDir(),
	)
	return cmd
}

// Configure implements DaemonLauncher through the daemon's control pipe.
func (d Driver) Configure(dm *Daemon, s Settings) error {
	var cmds []string
	if s.ActiveThreadPercentage > 0 {
		cmds = append(cmds, fmt.Sprintf("set_default_active_thread_percentage %d", s.ActiveThreadPercentage))
	}
	if s.PinnedMemoryBytes > 0 {
		cmds = append(cmds, fmt.Sprintf("set_default_device_pinned_mem_limit 0 %s", MiB(s.PinnedMemoryBytes)))
	}
	for _, c := range cmds {
		cmd := exec.Command(d.bin("nvidia-cuda-mps-control"))
		cmd.Env = append(d.env(), "CUDA_MPS_PIPE_DIRECTORY="+dm.PipeDir(), "CUDA_MPS_LOG_DIRECTORY="+dm.LogDir())
		cmd.Stdin = strings.NewReader(c + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("MPS %q: %w: %s", c, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
