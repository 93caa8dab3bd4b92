// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrSuperseded is returned to a plugin instance that a newer one on the
// same node has replaced (a rolling update runs both for a while). The
// kubelet retries the call, and by then it talks to the newer instance.
var ErrSuperseded = errors.New("this plugin instance was replaced by a newer one on this node; the kubelet retries the call there")

// Fence serialises plugin processes that share one state directory.
//
// During a rolling update (the DaemonSet's maxSurge) an old and a new
// plugin pod run at once. The new one must not roll back a claim the old
// one is preparing, and the old one must not prepare anything the new one
// cannot see. So:
//   - start-up (checkpoint load and recovery) holds an exclusive flock and
//     then writes its own token into the owner file;
//   - every prepare and unprepare holds a shared flock and first checks
//     that the owner file still names its own token.
//
// flock(2) locks belong to the open file description, so two Fences in one
// process exclude each other exactly as two processes do.
//
// The calls of one Fence share one shared lock, taken by the first call
// in flight and released by the last, on a lock file opened once: a
// take-over waits for the same calls as with a lock per call. The owner
// file is read again only when it is no longer the file last read (a
// stat compares device and inode; the file last read is kept open so that
// its inode number cannot be reused). A prepare and an unprepare then
// cost a stat each, and a flock pair while no other call is in flight,
// instead of two opens, reads and closes.
type Fence struct {
	lockPath, ownerPath string
	token               string

	mu       sync.Mutex // guards the fields below; held across flock only when no call is in flight
	lockFile *os.File   // the lock file, opened by the first Enter
	inFlight int        // Enter calls not left yet; the shared lock is held while > 0
	owner    *os.File   // the owner file last read naming this instance
	ownerID  os.FileInfo
}

// NewFence returns the fence of dir for a plugin instance identified by
// token (the pod UID, or anything unique per process).
func NewFence(dir, token string) (*Fence, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	return &Fence{lockPath: filepath.Join(dir, ".lock"), ownerPath: filepath.Join(dir, ".owner"), token: token}, nil
}

// TakeOver waits for every in-flight call of older instances to finish,
// then makes this instance the owner. The caller loads and recovers the
// checkpoint before calling the returned release.
func (f *Fence) TakeOver() (release func(), err error) {
	file, err := f.lock(syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(f.ownerPath, []byte(f.token), true); err != nil {
		unlock(file)
		return nil, fmt.Errorf("record plugin owner: %w", err)
	}
	return func() { unlock(file) }, nil
}

// Enter is held around one prepare or unprepare. It fails with
// ErrSuperseded once a newer instance took over.
func (f *Fence) Enter() (release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight == 0 {
		if f.lockFile == nil {
			file, err := os.OpenFile(f.lockPath, os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				return nil, fmt.Errorf("open state lock: %w", err)
			}
			f.lockFile = file
		}
		if err := flock(f.lockFile, syscall.LOCK_SH); err != nil {
			return nil, err
		}
	}
	if err := f.checkOwnerLocked(); err != nil {
		if f.inFlight == 0 {
			_ = syscall.Flock(int(f.lockFile.Fd()), syscall.LOCK_UN)
		}
		return nil, err
	}
	f.inFlight++
	return f.leave, nil
}

func (f *Fence) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	if f.inFlight == 0 {
		_ = syscall.Flock(int(f.lockFile.Fd()), syscall.LOCK_UN)
	}
}

// checkOwnerLocked fails unless the owner file names this instance. The
// caller holds f.mu and the shared lock, so no take-over is under way.
func (f *Fence) checkOwnerLocked() error {
	st, err := os.Stat(f.ownerPath)
	if err != nil {
		return fmt.Errorf("read plugin owner: %w", err)
	}
	if f.owner != nil && os.SameFile(st, f.ownerID) {
		return nil // the file read last, which named this instance
	}
	file, err := os.Open(f.ownerPath)
	if err != nil {
		return fmt.Errorf("read plugin owner: %w", err)
	}
	owner, err := io.ReadAll(io.LimitReader(file, int64(len(f.token))+1))
	if err == nil {
		st, err = file.Stat()
	}
	if err != nil {
		file.Close()
		return fmt.Errorf("read plugin owner: %w", err)
	}
	if string(owner) != f.token {
		file.Close()
		return ErrSuperseded
	}
	if f.owner != nil {
		f.owner.Close()
	}
	f.owner, f.ownerID = file, st
	return nil
}

func (f *Fence) lock(how int) (*os.File, error) {
	file, err := os.OpenFile(f.lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state lock: %w", err)
	}
	if err := flock(file, how); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

func flock(file *os.File, how int) error {
	for {
		err := syscall.Flock(int(file.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return fmt.Errorf("lock state dir: %w", err)
			}
			return nil
		}
	}
}

func unlock(file *os.File) {
	_ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
	file.Close()
}
