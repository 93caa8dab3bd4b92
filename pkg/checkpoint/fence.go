// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
type Fence struct {
	lockPath, ownerPath string
	token               string
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
	file, err := f.lock(syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	owner, err := os.ReadFile(f.ownerPath)
	if err != nil {
		unlock(file)
		return nil, fmt.Errorf("read plugin owner: %w", err)
	}
	if string(owner) != f.token {
		unlock(file)
		return nil, ErrSuperseded
	}
	return func() { unlock(file) }, nil
}

func (f *Fence) lock(how int) (*os.File, error) {
	file, err := os.OpenFile(f.lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state lock: %w", err)
	}
	for {
		err = syscall.Flock(int(file.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	return file, nil
}

func unlock(file *os.File) {
	_ = syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
	file.Close()
}
