// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/ownprocess"
)

// nvidiaRoots returns the host and GPU Operator driver roots of NVIDIA's
// R535 userspace that hack/nvidia-userspace.sh unpacks; `make test` sets
// GDRA_NVIDIA_HOST_ROOT to the first, the second is its sibling.
func nvidiaRoots(t *testing.T) (host, operator string) {
	t.Helper()
	host = os.Getenv("GDRA_NVIDIA_HOST_ROOT")
	if host == "" {
		t.Skip("GDRA_NVIDIA_HOST_ROOT is not set: run `make test`, which unpacks NVIDIA's R535 userspace with hack/nvidia-userspace.sh and sets it")
	}
	operator = filepath.Join(filepath.Dir(host), "operator")
	if _, err := os.Stat(operator); err != nil {
		operator = ""
	}
	return host, operator
}

func TestFindLibraryInNVIDIARoots(t *testing.T) {
	host, operator := nvidiaRoots(t)
	// A Debian host install: the library is in nvidia/current, reached
	// through the alternatives links the root's ld cache names.
	path, source, err := findInRoot(host)
	if err != nil {
		t.Fatal(err)
	}
	realHost, _ := filepath.EvalSymlinks(host)
	if source != "ld cache" || !strings.HasPrefix(path, filepath.Join(realHost, "usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.")) {
		t.Errorf("host root: %s from %s, want nvidia/current/libnvidia-ml.so.<version> from the ld cache", path, source)
	}
	// The same root seen through a link, as a container mount may be.
	link := filepath.Join(t.TempDir(), "driver")
	if err := os.Symlink(host, link); err != nil {
		t.Fatal(err)
	}
	if p, err := FindLibrary(link, ""); err != nil || p != path {
		t.Errorf("host root through a link: %s, %v; want %s", p, err, path)
	}
	if operator == "" {
		t.Log("no GPU Operator root next to the host root; run hack/nvidia-userspace.sh")
		return
	}
	path, source, err = findInRoot(operator)
	realOperator, _ := filepath.EvalSymlinks(operator)
	if err != nil || source != "ld cache" || !strings.HasPrefix(path, filepath.Join(realOperator, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.")) {
		t.Errorf("operator root: %s from %s, %v; want its flat usr/lib/x86_64-linux-gnu/libnvidia-ml.so.<version> from the ld cache", path, source, err)
	}
}

// TestOpenNVMLWithoutKernelModule: NVIDIA's real library on a machine
// without the kernel module fails nvmlInit with DRIVER_NOT_LOADED, which
// is a wait, not a failure; a second try calls nvmlInit again on the
// library already loaded; another library file needs a new process.
func TestOpenNVMLWithoutKernelModule(t *testing.T) {
	host, operator := nvidiaRoots(t)
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil {
		t.Skip("this machine has the NVIDIA kernel module loaded; the test needs one without")
	}
	if ownprocess.Run(t) {
		return
	}
	for try := 1; try <= 2; try++ {
		_, err := OpenNVML(host, "")
		var notReady *NotReadyError
		if !errors.As(err, &notReady) || notReady.Return != nvml.ERROR_DRIVER_NOT_LOADED {
			t.Fatalf("try %d: %v, want a NotReadyError with ERROR_DRIVER_NOT_LOADED", try, err)
		}
		if !strings.Contains(notReady.Problem(), "Driver Not Loaded (ERROR_DRIVER_NOT_LOADED)") || !strings.Contains(notReady.Check(), "kernel module") {
			t.Errorf("try %d: %q does not say what is missing and what to check", try, err)
		}
		if notReady.State() != (&NotReadyError{Library: notReady.Library, Return: nvml.ERROR_DRIVER_NOT_LOADED}).State() {
			t.Errorf("the state of one cause changed: %s", notReady.State())
		}
	}
	if operator == "" {
		return
	}
	_, err := OpenNVML(operator, "")
	var notReady *NotReadyError
	if err == nil || errors.As(err, &notReady) || !strings.Contains(err.Error(), "restart") {
		t.Errorf("another library after one was loaded: %v, want an error (not a wait) saying a restart loads it", err)
	}
}

// ldCacheEntry is one library of a synthetic ld.so.cache.
type ldCacheEntry struct{ name, path string }

// writeLdCache writes root/etc/ld.so.cache in glibc's format
// (glibc-ld.so.cache1.1, the one ldconfig writes since glibc 2.32).
func writeLdCache(t *testing.T, root string, entries ...ldCacheEntry) {
	t.Helper()
	type header struct {
		Magic              [17]byte
		Version            [3]byte
		NLibs, StringsSize uint32
		_                  [3]uint32
		_                  uint64
	}
	type entry struct {
		Flags                 int32
		Key, Value, OSVersion uint32
		HWCap                 uint64
	}
	const headerSize, entrySize = 48, 24
	var strs bytes.Buffer
	base := uint32(headerSize + entrySize*len(entries))
	add := func(s string) uint32 {
		off := base + uint32(strs.Len())
		strs.WriteString(s + "\x00")
		return off
	}
	var list []entry
	for _, e := range entries {
		list = append(list, entry{Flags: 0x0301, Key: add(e.name), Value: add(e.path)}) // ELF, x86-64
	}
	h := header{NLibs: uint32(len(entries)), StringsSize: uint32(strs.Len())}
	copy(h.Magic[:], "glibc-ld.so.cache")
	copy(h.Version[:], "1.1")
	var out bytes.Buffer
	for _, v := range []any{h, list, strs.Bytes()} {
		if err := binary.Write(&out, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "etc/ld.so.cache"), out.String())
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func newRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestFindLibraryFollowsLinksInsideTheRoot(t *testing.T) {
	// A Debian host mounted at a root of its own: its alternatives links
	// are absolute, so they mean the root's /etc and /usr, not ours.
	root := newRoot(t)
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.535.1")
	writeFile(t, lib, "ELF")
	symlink(t, "libnvidia-ml.so.535.1", filepath.Join(root, "usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1"))
	symlink(t, "/etc/alternatives/nvidia--libnvidia-ml.so.1-x86_64-linux-gnu", filepath.Join(root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"))
	symlink(t, "/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1", filepath.Join(root, "etc/alternatives/nvidia--libnvidia-ml.so.1-x86_64-linux-gnu"))
	if p, source, err := findInRoot(root); err != nil || p != lib || source != "library directories" {
		t.Errorf("Debian layout with absolute links: %s from %s, %v; want %s", p, source, err, lib)
	}
	// A library reachable only through an absolute link.
	root = newRoot(t)
	lib = filepath.Join(root, "opt/nvidia/lib/libnvidia-ml.so.550.2")
	writeFile(t, lib, "ELF")
	symlink(t, "/opt/nvidia/lib/../lib/libnvidia-ml.so.550.2", filepath.Join(root, "usr/lib64/libnvidia-ml.so.1"))
	if p, _, err := findInRoot(root); err != nil || p != lib {
		t.Errorf("absolute link: %s, %v; want %s", p, err, lib)
	}
	// ".." does not lead out of the root.
	root = newRoot(t)
	outside := filepath.Join(newRoot(t), "libnvidia-ml.so.1")
	writeFile(t, outside, "ELF")
	symlink(t, strings.Repeat("../", 20)+strings.TrimPrefix(outside, "/"), filepath.Join(root, "usr/lib64/libnvidia-ml.so.1"))
	if p, _, err := findInRoot(root); err == nil {
		t.Errorf("found %s through a link out of the root", p)
	}
}

func TestFindLibraryAsksTheLdCacheFirst(t *testing.T) {
	root := newRoot(t)
	// A stale copy where the directories are searched, and the one the
	// root's loader uses in a directory only its ld cache names.
	writeFile(t, filepath.Join(root, "usr/lib64/libnvidia-ml.so.1"), "stale")
	lib := filepath.Join(root, "opt/driver/lib/libnvidia-ml.so.570.1")
	writeFile(t, lib, "ELF")
	symlink(t, "libnvidia-ml.so.570.1", filepath.Join(root, "opt/driver/lib/libnvidia-ml.so.1"))
	writeLdCache(t, root, ldCacheEntry{"libcuda.so.1", "/opt/driver/lib/libcuda.so.1"}, ldCacheEntry{LibraryName, "/opt/driver/lib/libnvidia-ml.so.1"})
	if p, source, err := findInRoot(root); err != nil || p != lib || source != "ld cache" {
		t.Fatalf("%s from %s, %v; want %s from the ld cache", p, source, err, lib)
	}
	// ldconfig rewrites the cache when the driver changes: it is read again.
	lib2 := filepath.Join(root, "opt/driver2/libnvidia-ml.so.1")
	writeFile(t, lib2, "ELF")
	writeLdCache(t, root, ldCacheEntry{LibraryName, "/opt/driver2/libnvidia-ml.so.1"})
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(root, "etc/ld.so.cache"), future, future); err != nil {
		t.Fatal(err)
	}
	if p, _, err := findInRoot(root); err != nil || p != lib2 {
		t.Errorf("after the ld cache changed: %s, %v; want %s", p, err, lib2)
	}
	// An ld cache entry that leads out of the root is not the root's.
	root = newRoot(t)
	outside := filepath.Join(newRoot(t), "libnvidia-ml.so.1")
	writeFile(t, outside, "ELF")
	symlink(t, strings.Repeat("../", 20)+strings.TrimPrefix(outside, "/"), filepath.Join(root, "lib/libnvidia-ml.so.1"))
	writeLdCache(t, root, ldCacheEntry{LibraryName, "/lib/libnvidia-ml.so.1"})
	if _, _, err := findInRoot(root); err == nil || !strings.Contains(err.Error(), "outside the root") {
		t.Errorf("ld cache entry out of the root: %v, want not found, saying why", err)
	}
}

func TestMissingLibrarySaysWhereItLooked(t *testing.T) {
	root := newRoot(t)
	_, err := FindLibrary(root, "")
	var notReady *NotReadyError
	if !errors.As(err, &notReady) || notReady.Library != "" {
		t.Fatalf("%v, want a NotReadyError without a library", err)
	}
	for _, want := range []string{root + "/etc/ld.so.cache (missing)", "usr/lib/x86_64-linux-gnu/nvidia/current", "usr/lib64", "--driver-root", "--nvml-library", "GPU Operator"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	_, err = FindLibrary(root, filepath.Join(root, "nowhere.so"))
	if !errors.As(err, &notReady) || !strings.Contains(err.Error(), "--nvml-library") {
		t.Errorf("explicit library missing: %v, want a NotReadyError naming --nvml-library", err)
	}
}

func TestNotReadyChecks(t *testing.T) {
	for ret, want := range map[nvml.Return]string{
		nvml.ERROR_DRIVER_NOT_LOADED:       "lsmod",
		nvml.ERROR_NO_PERMISSION:           "/dev/nvidiactl",
		nvml.ERROR_LIB_RM_VERSION_MISMATCH: "/proc/driver/nvidia/version",
		nvml.ERROR_LIBRARY_NOT_FOUND:       "ldd /x/libnvidia-ml.so.1",
		nvml.ERROR_UNKNOWN:                 "nvidia-smi",
	} {
		e := &NotReadyError{Library: "/x/libnvidia-ml.so.1", Return: ret}
		if !strings.Contains(e.Check(), want) || !strings.Contains(e.Error(), e.Check()) || !strings.HasPrefix(e.Error(), "initialise NVML from /x/libnvidia-ml.so.1: ") {
			t.Errorf("%v: %q, want a check mentioning %q", ret, e.Error(), want)
		}
	}
}
