package prepare

import (
	"sort"
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

// Lock locks every key, in sorted order to rule out deadlocks between
// claims that share devices, and returns the unlock function.
func (k *keyedLocks) Lock(keys ...string) func() {
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	held := make([]*keyedLock, 0, len(keys))
	for i, key := range keys {
		if i > 0 && keys[i-1] == key {
			continue
		}
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
		for _, key := range dedup(keys) {
			if l := k.locks[key]; l != nil {
				l.users--
				if l.users == 0 {
					delete(k.locks, key)
				}
			}
		}
		k.mu.Unlock()
	}
}

func dedup(sorted []string) []string {
	out := sorted[:0:0]
	for i, s := range sorted {
		if i == 0 || sorted[i-1] != s {
			out = append(out, s)
		}
	}
	return out
}
