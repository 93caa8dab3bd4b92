// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package capfile

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Counts are the file system calls this package made since the process
// started, by kind: the disk work of the prepare path, which goes through
// this package, so that a benchmark can put it beside the latency
// (pkg/driver BenchmarkPrepareUnprepare) and a test can hold it to a
// budget. Opens count files and directories opened for writing or
// listing (not reads of a file); unlinks count rmdir too.
type Counts struct {
	Open, Fsync, Rename, Unlink, Mkdir, Chmod int64
}

var counts struct {
	open, fsync, rename, unlink, mkdir, chmod atomic.Int64
}

// Snapshot returns the counts so far.
func Snapshot() Counts {
	return Counts{
		Open: counts.open.Load(), Fsync: counts.fsync.Load(), Rename: counts.rename.Load(),
		Unlink: counts.unlink.Load(), Mkdir: counts.mkdir.Load(), Chmod: counts.chmod.Load(),
	}
}

// Sub is c minus an earlier snapshot.
func (c Counts) Sub(o Counts) Counts {
	return Counts{c.Open - o.Open, c.Fsync - o.Fsync, c.Rename - o.Rename, c.Unlink - o.Unlink, c.Mkdir - o.Mkdir, c.Chmod - o.Chmod}
}

// narrowed reports whether the process's umask takes bits off mode, so
// that a file created with mode needs a chmod to get it. The umask is
// read once (from /proc/self/status: reading it with umask(2) means
// setting it, which races with every other file creation); the plugin
// never changes it. Where it cannot be read, every creation is chmodded.
func narrowed(mode os.FileMode) bool {
	umaskOnce.Do(func() { umask = readUmask() })
	return umask < 0 || uint32(mode.Perm())&uint32(umask) != 0
}

var (
	umaskOnce sync.Once
	umask     = -1
)

func readUmask() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return -1
			}
			return int(m)
		}
	}
	return -1
}
