// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Helpers that take parts of the local cluster (hack/cluster) down and up
// again, for the tests of node reboots and API server outages.

// cacheDir is hack/cluster's $CACHE and clusterDir its $CLUSTER
// (hack/e2e.sh exports both; the defaults are lib.sh's).
func cacheDir() string {
	if d := os.Getenv("GPU_DRA_CACHE"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "gpu-dra-driver")
}

func clusterDir() string {
	if d := os.Getenv("GPU_DRA_CLUSTER_DIR"); d != "" {
		return d
	}
	return filepath.Join(cacheDir(), "cluster")
}

func pidFile(name string) string { return filepath.Join(clusterDir(), "pids", name) }

// component is a stopped cluster process and how it ran: `cluster.sh up`
// cannot start one component again (with the kubelet or the API server
// down it takes the whole cluster down and starts a fresh one), so it is
// started again exactly as it ran.
type component struct {
	name string
	exe  string
	args []string
	env  []string
	dir  string
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func componentPID(name string) (int, error) {
	data, err := os.ReadFile(pidFile(name))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

func componentRunning(name string) bool {
	pid, err := componentPID(name)
	return err == nil && alive(pid)
}

func nulSplit(b []byte) []string {
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// stopComponent stops a cluster component as cluster.sh's stop does
// (SIGTERM to its process group, SIGKILL after 10 s) and returns what
// starts it again. The test's cleanup starts it again if the test does
// not.
func stopComponent(t *testing.T, name string) *component {
	t.Helper()
	pid, err := componentPID(name)
	if err != nil || !alive(pid) {
		t.Fatalf("cluster component %s is not running (%s): %v", name, pidFile(name), err)
	}
	c := &component{name: name}
	cmdline, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	environ, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	exe, err3 := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	dir, err4 := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatalf("reading how %s (pid %d) runs: %v", name, pid, err)
	}
	c.args, c.env, c.exe, c.dir = nulSplit(cmdline), nulSplit(environ), exe, dir
	t.Cleanup(func() {
		if !componentRunning(name) {
			t.Logf("cleanup: starting %s again", name)
			c.start(t)
		}
	})
	if syscall.Kill(-pid, syscall.SIGTERM) != nil {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for alive(pid) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	_ = os.Remove(pidFile(name))
	return c
}

// start runs the component again as cluster.sh's start_bg does (a session
// of its own, output to $CLUSTER/logs/<name>.log, which it appends to) and
// records its pid where cluster.sh looks. It returns when the process was
// started.
func (c *component) start(t *testing.T) time.Time {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(clusterDir(), "logs", c.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	fmt.Fprintf(log, "\n==== %s: started again by the e2e test %s ====\n", time.Now().Format(time.RFC3339Nano), t.Name())
	// This process inherited descriptors that Go does not mark
	// close-on-exec: hack/e2e.sh's cluster lock (fd 9) among them. A
	// component holding it would keep every later run waiting for it.
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, fd := range fds {
			if n, err := strconv.Atoi(fd.Name()); err == nil && n > 2 {
				syscall.CloseOnExec(n)
			}
		}
	}
	cmd := &exec.Cmd{Path: c.exe, Args: c.args, Env: c.env, Dir: c.dir, Stdout: log, Stderr: log,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", c.name, err)
	}
	// Reaped here while the test runs; it outlives the test.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(pidFile(c.name), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return started
}

// ctrTask is a containerd task of the kubelet's namespace.
type ctrTask struct {
	id, status string
	pid        int
}

func ctrTasks(t *testing.T) []ctrTask {
	t.Helper()
	out, err := exec.Command("ctr", "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v\n%s", err, out)
	}
	var tasks []ctrTask
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[1])
		tasks = append(tasks, ctrTask{id: f[0], pid: pid, status: f[2]})
	}
	return tasks
}

// killAllContainers SIGKILLs every container of the node (pod sandboxes
// included), as a power cut would, and waits until none runs.
func killAllContainers(t *testing.T) int {
	t.Helper()
	tasks := ctrTasks(t)
	for _, task := range tasks {
		if task.status == "RUNNING" {
			_ = exec.Command("ctr", "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", task.id).Run()
		}
	}
	waitFor(t, "every container stopped", 30*time.Second, func() (bool, string) {
		var running []string
		for _, task := range ctrTasks(t) {
			if task.status == "RUNNING" {
				running = append(running, task.id[:12])
			}
		}
		return len(running) == 0, strings.Join(running, " ")
	})
	return len(tasks)
}

// killShims kills the containerd shims that are left (containers outlive
// containerd through them), as a reboot would.
func killShims() int {
	files, _ := filepath.Glob(filepath.Join(clusterDir(), "run", "containerd", "io.containerd.runtime.v2.task", "k8s.io", "*", "shim.pid"))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 && alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			n++
		}
	}
	return n
}

// pluginPod is the one plugin pod of this node.
func pluginPod(t *testing.T) corev1.Pod {
	t.Helper()
	pods := pluginPodList(t)
	if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 1 {
		t.Fatalf("want one plugin pod with one container, have %d pods", len(pods))
	}
	return pods[0]
}

// pluginTasks lists the running tasks that are plugin processes (not the
// MPS daemons and clients, which run the same binary), by container ID.
func pluginTasks(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, task := range ctrTasks(t) {
		if task.status != "RUNNING" {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", task.pid))
		args := nulSplit(cmdline)
		if err == nil && strings.HasSuffix(args[0], "gpu-kubelet-plugin") && slices.Contains(args, "--driver-name="+driverName) {
			out[task.id] = task.pid
		}
	}
	return out
}

// processStart is when a process started, from /proc (10 ms ticks).
func processStart(pid int) (time.Time, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, err
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 20 {
		return time.Time{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22: starttime
	if err != nil {
		return time.Time{}, err
	}
	procStat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	var btime int64
	for _, line := range strings.Split(string(procStat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			btime, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	const hz = 100 // USER_HZ on Linux
	return time.Unix(btime, 0).Add(time.Duration(ticks) * time.Second / hz), nil
}

// containerOf returns a pod container's status by name.
func containerOf(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// eventsSince lists the events of an object (any namespace's) newer than
// since, as "Type Reason: message".
func eventsSince(t *testing.T, namespace, kind, name string, since time.Time) []string {
	t.Helper()
	list, err := client.CoreV1().Events(namespace).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind + ",involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		// Event times have a resolution of a second.
		if !at.Before(since.Truncate(time.Second)) {
			out = append(out, fmt.Sprintf("%s %s %s: %s (x%d)", at.Format(time.TimeOnly), e.Type, e.Reason, e.Message, max(e.Count, 1)))
		}
	}
	return out
}

// testNamespace creates a namespace that the test's cleanup deletes (its
// pods and claims first, so that the driver unprepares them).
func testNamespace(t *testing.T, name string) {
	t.Helper()
	_ = exec.Command("kubectl", "delete", "namespace", name, "--ignore-not-found", "--wait=true").Run()
	kubectl(t, "create", "namespace", name)
	waitFor(t, "the default ServiceAccount of "+name, 60*time.Second, func() (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	t.Cleanup(func() {
		out, err := exec.Command("kubectl", "delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=180s").CombinedOutput()
		if err != nil {
			t.Errorf("deleting namespace %s: %v\n%s", name, err, out)
		}
	})
}

// claimOf returns the name of the ResourceClaim a pod uses as its claim
// podClaim (its own, from a template, or a named one).
func claimOf(t *testing.T, namespace, podName, podClaim string) string {
	t.Helper()
	p := podIn(t, namespace, podName)
	for _, rc := range p.Spec.ResourceClaims {
		if rc.Name == podClaim && rc.ResourceClaimName != nil {
			return *rc.ResourceClaimName
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == podClaim && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	t.Fatalf("pod %s/%s has no claim %s", namespace, podName, podClaim)
	return ""
}

// statusUUIDs returns what the driver wrote into a claim's device status:
// the UUID of each allocated device, by device name.
func statusUUIDs(t *testing.T, namespace, claim string) (uuids map[string]string, allocated int) {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(namespace).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uuids = map[string]string{}
	for _, s := range c.Status.Devices {
		if s.Driver != driverName || s.Data == nil {
			continue
		}
		var data struct {
			UUID string `json:"uuid"`
		}
		if err := json.Unmarshal(s.Data.Raw, &data); err == nil && data.UUID != "" {
			uuids[s.Device] = data.UUID
		}
	}
	if c.Status.Allocation != nil {
		allocated = len(c.Status.Allocation.Devices.Results)
	}
	return uuids, allocated
}

// waitStatusUUIDs waits until the driver wrote device status for every
// device of a claim, and for want (when not nil) to accept it.
func waitStatusUUIDs(t *testing.T, namespace, claim string, want func(map[string]string) bool) map[string]string {
	t.Helper()
	var got map[string]string
	waitFor(t, "device status of claim "+claim, 60*time.Second, func() (bool, string) {
		uuids, n := statusUUIDs(t, namespace, claim)
		got = uuids
		return n > 0 && len(uuids) == n && (want == nil || want(uuids)), fmt.Sprintf("%d of %d devices: %v", len(uuids), n, uuids)
	})
	return got
}

// pluginLogs is the current (or previous) plugin container's log.
func pluginLogs(t *testing.T, pod string, previous bool) string {
	t.Helper()
	args := []string{"logs", "-n", driverNS, pod}
	if previous {
		args = append(args, "--previous")
	}
	out, err := exec.Command("kubectl", args...).CombinedOutput()
	if err != nil {
		t.Logf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
