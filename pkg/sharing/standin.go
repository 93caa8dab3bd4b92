package sharing

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// StandInEnv makes a binary that calls RunStandInIfRequested act as the
// simulated MPS control daemon.
const StandInEnv = "GPU_DRA_MPS_STANDIN_DIR"

// StandIn launches the simulated MPS control daemon: this very executable
// re-run with StandInEnv set, so the plugin (and test binaries) need no
// extra binary. It records its settings where tests can read them.
type StandIn struct {
	// Exe is the executable to re-run; os.Executable() when empty.
	Exe string
}

// Command implements DaemonLauncher.
func (s StandIn) Command(d *Daemon) *exec.Cmd {
	exe := s.Exe
	if exe == "" {
		exe, _ = os.Executable()
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), StandInEnv+"="+d.Dir)
	return cmd
}

// Configure implements DaemonLauncher by recording the settings.
func (s StandIn) Configure(d *Daemon, st Settings) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d.Dir, "settings.json"), data, 0o644)
}

// StandInSettings reads what the stand-in daemon was configured with.
func StandInSettings(d *Daemon) (Settings, error) {
	var st Settings
	data, err := os.ReadFile(filepath.Join(d.Dir, "settings.json"))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(data, &st)
}

// RunStandInIfRequested turns the process into the stand-in daemon when
// StandInEnv is set: it creates the control "pipe" and waits for SIGTERM.
// Call it first in main (and TestMain).
func RunStandInIfRequested() {
	dir := os.Getenv(StandInEnv)
	if dir == "" {
		return
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	control := filepath.Join(dir, "pipe", "control")
	_ = os.WriteFile(control, []byte("simulated MPS control daemon\n"), 0o644)
	<-sigs
	_ = os.Remove(control)
	os.Exit(0)
}
