// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"slices"
	"sync"
)

// keyedLocks hands out one mutex per key (claim UID or device name), so
// unrelated claims never wait for each other.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

func newKeyedLocks() *keyedLocks { return &keyedLocks{locks: map[string]*keyedLock{}} }

// Lock locks every key once, in sorted order to rule out deadlocks between
// claims that share devices, and returns the unlock function.
func (k *keyedLocks) Lock(keys ...string) func() {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	held := make([]*keyedLock, 0, len(keys))
	for _, key := range keys {
		k.mu.Lock()
		l := k.locks[key]
		if l == nil {
			l = &keyedLock{}
			k.locks[key] = l
		}
		l.users++
		k.mu.Unlock()
		l.Lock()
		held = append(held, l)
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Unlock()
		}
		k.mu.Lock()
		for i, key := range keys {
			if held[i].users--; held[i].users == 0 {
				delete(k.locks, key)
			}
		}
		k.mu.Unlock()
	}
}

// TryLock takes one key's lock if nobody holds it, and returns the unlock
// and true; otherwise it returns false at once. For background passes that
// must not queue behind a prepare (which can wait long for an MPS daemon)
// and can look again on their next pass.
func (k *keyedLocks) TryLock(key string) (func(), bool) {
	k.mu.Lock()
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	if !l.TryLock() {
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
		return nil, false
	}
	l.users++
	k.mu.Unlock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}, true
}
