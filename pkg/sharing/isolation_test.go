// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func ensureIn(t *testing.T, m *MPS, namespace string) error {
	t.Helper()
	d := m.Daemon(fakeUUID)
	d.Namespace = namespace
	return m.Ensure(d)
}

// A daemon serves the namespace of the claim that started it; a claim of
// another namespace is refused with an error naming both namespaces and
// the setting that allows it, until the daemon's last claim is gone.
func TestEnsureRefusesAnotherNamespace(t *testing.T) {
	f := &fakeRunner{running: map[string]bool{}, pipe: true}
	m := &MPS{Root: t.TempDir(), Runner: f, ReadyTimeout: time.Second}
	if err := ensureIn(t, m, "team-a"); err != nil {
		t.Fatal(err)
	}
	if err := ensureIn(t, m, "team-a"); err != nil {
		t.Fatalf("a second claim of the same namespace: %v", err)
	}
	err := ensureIn(t, m, "team-b")
	if err == nil {
		t.Fatal("a claim of namespace team-b shares the daemon of team-a")
	}
	for _, want := range []string{`"team-a"`, `"team-b"`, fakeUUID, CrossNamespaceFlag, CrossNamespaceValue + "=true"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
	if f.starts != 1 {
		t.Errorf("%d starts, want 1", f.starts)
	}
	// A daemon that died still belongs to team-a, whose claims are still
	// prepared: team-b may not restart it as its own.
	delete(f.running, fakeUUID)
	if err := ensureIn(t, m, "team-b"); err == nil {
		t.Fatal("team-b restarted team-a's dead daemon")
	}
	// The last claim goes: the next namespace gets the device.
	if err := m.Stop(m.Daemon(fakeUUID)); err != nil {
		t.Fatal(err)
	}
	if err := ensureIn(t, m, "team-b"); err != nil {
		t.Fatalf("team-b after team-a's daemon stopped: %v", err)
	}
}

func TestEnsureSharesAcrossNamespacesWhenAllowed(t *testing.T) {
	f := &fakeRunner{running: map[string]bool{}, pipe: true}
	m := &MPS{Root: t.TempDir(), Runner: f, ReadyTimeout: time.Second, ShareAcrossNamespaces: true}
	for _, ns := range []string{"team-a", "team-b"} {
		if err := ensureIn(t, m, ns); err != nil {
			t.Fatalf("namespace %s: %v", ns, err)
		}
	}
	if f.starts != 1 {
		t.Errorf("%d starts, want one daemon for both namespaces", f.starts)
	}
}

// Directory modes: Dir lets others search only (the MPS server runs with
// its client's user ID); the pipe directory is searchable (clients and
// servers of any user reach its sockets; clients get it read-only); the
// log directory is the daemon's alone; a plain shm directory (no daemon
// pod) is writable by root alone. Directories left 0755 by an earlier version are tightened.
func TestEnsureDirectoryModes(t *testing.T) {
	f := &fakeRunner{running: map[string]bool{}, pipe: true}
	m := &MPS{Root: t.TempDir(), Runner: f, ReadyTimeout: time.Second}
	d := m.Daemon(fakeUUID)
	if err := os.MkdirAll(d.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensureIn(t, m, "team-a"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		d.Dir:             0o711,
		d.PipeDir():       0o755,
		d.LogDir():        0o700,
		d.ShmDir():        0o755,
		d.NamespaceFile(): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSticky); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
}

// The kernel facts ClientEdits relies on, on a real read-only bind mount
// (root only: it needs a mount namespace of its own): a client connects to
// a socket in a read-only pipe directory, and cannot rename it, create a
// file or plant a link there (EROFS).
func TestReadOnlyPipeDirStillConnects(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a bind mount")
	}
	dir := t.TempDir()
	pipe, mnt := filepath.Join(dir, "pipe"), filepath.Join(dir, "mnt")
	for _, p := range []string{pipe, mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("unix", filepath.Join(pipe, "control"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	done := make(chan error, 1)
	skip := make(chan string, 1)
	go func() {
		// The mount namespace is this thread's; it ends with the
		// goroutine (the thread is not returned to the scheduler).
		runtime.LockOSThread()
		if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
			skip <- "unshare: " + err.Error()
			return
		}
		if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
			skip <- "make / private: " + err.Error()
			return
		}
		if err := syscall.Mount(pipe, mnt, "", syscall.MS_BIND, ""); err != nil {
			skip <- "bind: " + err.Error()
			return
		}
		if err := syscall.Mount("", mnt, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			done <- err
			return
		}
		done <- checkReadOnlyPipe(mnt)
	}()
	select {
	case why := <-skip:
		t.Skip(why)
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkReadOnlyPipe(mnt string) error {
	c, err := net.Dial("unix", filepath.Join(mnt, "control"))
	if err != nil {
		return errors.New("connect through the read-only mount: " + err.Error())
	}
	buf := make([]byte, 6)
	_, err = c.Read(buf)
	c.Close()
	if err != nil || string(buf) != "hello\n" {
		return errors.New("no greeting through the read-only mount")
	}
	for what, op := range map[string]func() error{
		"rename the socket": func() error { return os.Rename(filepath.Join(mnt, "control"), filepath.Join(mnt, "stolen")) },
		"remove the socket": func() error { return os.Remove(filepath.Join(mnt, "control")) },
		"create a file":     func() error { return os.WriteFile(filepath.Join(mnt, "fake"), nil, 0o644) },
		"plant a link":      func() error { return os.Symlink("/etc/shadow", filepath.Join(mnt, "control.log")) },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			return errors.New(what + " in the read-only pipe directory: want EROFS, got " + errString(err))
		}
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}
