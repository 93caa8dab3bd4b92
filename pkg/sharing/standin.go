// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StandInEnv makes a binary that calls RunStandInIfRequested act as the
// simulated MPS control daemon.
const StandInEnv = "GPU_DRA_MPS_STANDIN_DIR"

// StandIn launches the simulated MPS control daemon as a local process:
// this very executable re-run with StandInEnv set, so tests need no extra
// binary.
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

// RunStandInIfRequested turns the process into the stand-in daemon when
// StandInEnv is set, until SIGTERM. Call it first in main (and TestMain).
func RunStandInIfRequested() {
	dir := os.Getenv(StandInEnv)
	if dir == "" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := RunStandIn(ctx, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// StandInGreeting starts each line the stand-in sends its clients; the pid
// follows it.
const StandInGreeting = "simulated MPS control daemon pid="

// RunStandIn is the simulated MPS control daemon of the directory dir
// (Daemon.Dir): like the real one it serves a control socket in pipe/,
// here streaming "simulated MPS control daemon pid=N" to each connected
// client every second, so that a client notices when its daemon goes. It
// writes its pid to daemon.pid and ends when ctx does.
func RunStandIn(ctx context.Context, dir string) error {
	pipe := filepath.Join(dir, "pipe")
	if err := os.MkdirAll(pipe, 0o755); err != nil {
		return err
	}
	// A relative path keeps the socket name within the 108 bytes a unix
	// socket path may have, however deep dir is.
	if err := os.Chdir(pipe); err != nil {
		return err
	}
	_ = os.Remove("control")
	ln, err := net.Listen("unix", "control")
	if err != nil {
		return fmt.Errorf("stand-in MPS control socket: %w", err)
	}
	pidFile := filepath.Join(dir, "daemon.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		ln.Close()
		return err
	}
	var wg sync.WaitGroup
	connCtx, cancel := context.WithCancel(ctx)
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			break
		}
		wg.Add(1)
		go func() { defer wg.Done(); serveStandInClient(connCtx, conn) }()
	}
	cancel()
	wg.Wait()
	_ = os.Remove(filepath.Join(pipe, "control"))
	_ = os.Remove(pidFile)
	return nil
}

func serveStandInClient(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	line := fmt.Sprintf("%s%d\n", StandInGreeting, os.Getpid())
	for {
		if _, err := io.WriteString(conn, line); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// RunStandInClient is a simulated MPS client: it prints its MPS limits,
// connects to the control socket in pipeDir and prints what its daemon
// sends, with the time. It returns an error when the daemon goes.
func RunStandInClient(ctx context.Context, pipeDir string, out io.Writer) error {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CUDA_MPS_") {
			fmt.Fprintln(out, kv)
		}
	}
	// The socket file appears at bind, a moment before the daemon
	// listens: a connection refused in that moment is tried again.
	var conn net.Conn
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn, err = net.Dial("unix", filepath.Join(pipeDir, "control"))
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("connect to the MPS control daemon: %w", err)
	}
	go func() { <-ctx.Done(); conn.Close() }()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		fmt.Fprintf(out, "%s %s\n", time.Now().UTC().Format(time.RFC3339), sc.Text())
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.New("disconnected: the MPS control daemon went away")
}
