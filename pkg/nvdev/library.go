// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package nvdev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/nvidia-container-toolkit/pkg/lookup"
	"k8s.io/klog/v2"
)

// LibraryName is the file NVML is loaded from.
const LibraryName = "libnvidia-ml.so.1"

// libraryDirs are the directories NVIDIA's container toolkit searches for
// driver libraries under a driver root (lookup.NewLibraryLocator, v1.20.1),
// Debian's nvidia/current included.
var libraryDirs = []string{
	"/",
	"/usr/lib64",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib/x86_64-linux-gnu/nvidia/current",
	"/usr/lib/aarch64-linux-gnu/nvidia/current",
	"/lib64",
	"/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu",
	"/lib/x86_64-linux-gnu/nvidia/current",
	"/lib/aarch64-linux-gnu/nvidia/current",
}

// FindLibrary returns the libnvidia-ml the driver root's own programs
// load, or explicit when given. It looks where NVIDIA's tools look: first
// the root's ld cache (etc/ld.so.cache, read with the container toolkit's
// parser), then NVIDIA's library directories. Links are followed inside
// the root: an absolute link target (Debian's alternatives links are) is
// taken relative to the root, and a file outside the root is not the
// root's. The error is a *NotReadyError naming every place looked at.
func FindLibrary(driverRoot, explicit string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", &NotReadyError{Err: fmt.Errorf("NVML library %s: %w", explicit, err),
				Hint: "check --nvml-library; the GPU Operator's driver pod may still be installing the driver"}
		}
		return explicit, nil
	}
	path, _, err := findInRoot(driverRoot)
	return path, err
}

// findInRoot is FindLibrary under a root; source says where it found it.
func findInRoot(driverRoot string) (path, source string, err error) {
	root := filepath.Clean("/" + driverRoot)
	notFound := func(why string) error {
		return &NotReadyError{Err: fmt.Errorf("%s not found under driver root %q: %s", LibraryName, root, why),
			Hint: "is the NVIDIA driver installed (the GPU Operator's driver pod may still be installing it)? Does --driver-root point at its root (/ for a driver installed on the host, /run/nvidia/driver for the GPU Operator's)? Or pass --nvml-library, or --simulate on a node without GPUs"}
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", "", notFound(fmt.Sprintf("the root itself: %v", err))
	}
	cachePath := filepath.Join(root, "etc", "ld.so.cache")
	cacheNote := "its ld cache " + cachePath
	if l, err := ldCacheLocator(root, cachePath); err != nil {
		cacheNote += fmt.Sprintf(" (%v)", err)
	} else {
		found, _ := l.Locate(LibraryName)
		for _, p := range found {
			if within(realRoot, p) {
				return p, "ld cache", nil
			}
		}
		if len(found) > 0 {
			cacheNote += fmt.Sprintf(" (names %s outside the root)", strings.Join(found, ", "))
		} else {
			cacheNote += " (no entry)"
		}
	}
	for _, dir := range libraryDirs {
		p, err := resolveInRoot(realRoot, filepath.Join(dir, LibraryName))
		if err != nil {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, "library directories", nil
		}
	}
	return "", "", notFound(fmt.Sprintf("not in %s, nor in %s/{%s}/%s", cacheNote, strings.TrimSuffix(root, "/"),
		strings.Join(trimSlashes(libraryDirs), ","), LibraryName))
}

func trimSlashes(dirs []string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = strings.Trim(d, "/")
	}
	return out
}

func within(root, path string) bool {
	return root == "/" || strings.HasPrefix(path, root+"/")
}

// resolveInRoot follows every link on path (relative to root) as the
// root's own programs would see it: an absolute target starts again at
// root, and ".." stops at root. It returns the host path of the result.
func resolveInRoot(root, path string) (string, error) {
	resolved, todo, links := "/", strings.Split(path, "/"), 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			continue
		}
		next := filepath.Join(resolved, part)
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", err
			}
			resolved = next // not a link
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("%s: too many links", path)
		}
		if filepath.IsAbs(target) {
			resolved = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return filepath.Join(root, resolved), nil
}

// errLdCacheOnly turns off the directory search of NVIDIA's library
// locator, which then answers from the ld cache alone.
var errLdCacheOnly = errors.New("ld cache only")

// ldCaches keeps one parsed ld cache per root while the file stays the
// same: the toolkit's parser maps the file and never unmaps it, and a
// plugin that waits for its driver looks again every few seconds.
var ldCaches = struct {
	sync.Mutex
	byRoot map[string]cachedLocator
}{byRoot: map[string]cachedLocator{}}

type cachedLocator struct {
	info os.FileInfo
	l    lookup.Locator
}

func ldCacheLocator(root, cachePath string) (lookup.Locator, error) {
	info, err := os.Stat(cachePath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errors.New("missing")
		}
		return nil, err
	}
	ldCaches.Lock()
	defer ldCaches.Unlock()
	if c, ok := ldCaches.byRoot[root]; ok && os.SameFile(c.info, info) && c.info.ModTime().Equal(info.ModTime()) && c.info.Size() == info.Size() {
		return c.l, nil
	}
	l := lookup.NewLibraryLocator(lookup.WithRoot(root), lookup.WithLogger(toolkitLog{}),
		lookup.WithFilter(func(string) error { return errLdCacheOnly }))
	ldCaches.byRoot[root] = cachedLocator{info: info, l: l}
	return l, nil
}

// toolkitLog is the container toolkit's logger: its messages are details.
type toolkitLog struct{}

func (toolkitLog) Debugf(f string, a ...any)   { klog.V(6).Infof(f, a...) }
func (toolkitLog) Tracef(f string, a ...any)   { klog.V(7).Infof(f, a...) }
func (toolkitLog) Infof(f string, a ...any)    { klog.V(5).Infof(f, a...) }
func (toolkitLog) Warningf(f string, a ...any) { klog.V(4).Infof(f, a...) }
func (toolkitLog) Errorf(f string, a ...any)   { klog.V(4).Infof(f, a...) }

// NotReadyError says NVML cannot be used yet: its library is not there,
// or nvmlInit failed (most often because the kernel module is not loaded
// yet). Waiting can fix it, so the plugin waits instead of exiting.
type NotReadyError struct {
	// Library is the file nvmlInit was called from; empty when none
	// was found.
	Library string
	// Return is nvmlInit's result when Library is set.
	Return nvml.Return
	// Err is why no library was found.
	Err error
	// Hint says what to check.
	Hint string
}

func (e *NotReadyError) Error() string { return e.Problem() + "; " + e.Check() }

func (e *NotReadyError) Unwrap() error { return e.Err }

// Problem says what is missing.
func (e *NotReadyError) Problem() string {
	if e.Library == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("initialise NVML from %s: %s", e.Library, initProblem(e.Return))
}

// State is the same string for as long as the cause stays the same.
func (e *NotReadyError) State() string {
	if e.Library == "" {
		return "no library"
	}
	return fmt.Sprintf("%s: %d", e.Library, int32(e.Return))
}

// Check says what to look at on the node.
func (e *NotReadyError) Check() string {
	if e.Hint != "" || e.Library == "" {
		return e.Hint
	}
	switch e.Return {
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "is the NVIDIA kernel module loaded (lsmod | grep nvidia; /dev/nvidiactl)? Does nvidia-smi work on the node? With the GPU Operator, its driver pod may still be installing the driver"
	case nvml.ERROR_NO_PERMISSION:
		return "can the plugin open /dev/nvidiactl and /dev/nvidia*? Its container must be privileged or be given the device nodes"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the loaded kernel module is another version than the library (a driver upgrade without reboot?): compare /proc/driver/nvidia/version with the library's version; nvidia-smi fails the same way"
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "the file could not be loaded: is it for this architecture, and are its dependencies there (ldd " + e.Library + ")?"
	}
	return "does nvidia-smi work on the node? The kernel log (dmesg | grep -i nvrm) may say more"
}

// initProblem names an nvmlInit result in words and as its constant.
func initProblem(ret nvml.Return) string {
	words := nvml.ErrorString(ret)
	names := map[nvml.Return]string{nvml.ERROR_DRIVER_NOT_LOADED: "ERROR_DRIVER_NOT_LOADED", nvml.ERROR_NO_PERMISSION: "ERROR_NO_PERMISSION",
		nvml.ERROR_LIB_RM_VERSION_MISMATCH: "ERROR_LIB_RM_VERSION_MISMATCH", nvml.ERROR_LIBRARY_NOT_FOUND: "ERROR_LIBRARY_NOT_FOUND"}
	if name, ok := names[ret]; ok && name != words {
		return words + " (" + name + ")"
	}
	return words
}

// loaded is the library this process loaded: go-nvml binds its calls to
// the first libnvidia-ml loaded, for the life of the process.
var loaded struct {
	sync.Mutex
	path string
	info os.FileInfo
	lib  nvml.Interface
}

// OpenNVML loads and initialises the real NVML library. A *NotReadyError
// means waiting may help: call again later. A call after a failed
// nvmlInit calls it again on the library already loaded; when the
// driver's library is another file by then, only a new process can load
// it, and the error says so.
func OpenNVML(driverRoot, explicit string) (nvml.Interface, error) {
	path, err := FindLibrary(driverRoot, explicit)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, &NotReadyError{Err: fmt.Errorf("NVML library %s: %w", path, err), Hint: "the driver may be being installed or removed"}
	}
	loaded.Lock()
	defer loaded.Unlock()
	lib := loaded.lib
	switch {
	case lib == nil:
		lib = nvml.New(nvml.WithLibraryPath(path))
	case loaded.path != path || !os.SameFile(loaded.info, info):
		return nil, fmt.Errorf("the driver's %s is now %s, but this process loaded %s while NVML was not ready; a process loads it only once, so the plugin exits for its restart to load the new one", LibraryName, path, loaded.path)
	}
	ret := lib.Init()
	if ret != nvml.ERROR_LIBRARY_NOT_FOUND {
		loaded.path, loaded.info, loaded.lib = path, info, lib
	}
	if ret != nvml.SUCCESS {
		return nil, &NotReadyError{Library: path, Return: ret}
	}
	return lib, nil
}
