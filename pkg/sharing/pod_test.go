// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func newPodRunner(hostDriverRoot string) (*PodRunner, *fake.Clientset) {
	c := fake.NewClientset()
	// The API server gives each pod a UID; the fake does not.
	n := 0
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod); p.UID == "" {
			n++
			p.UID = types.UID(fmt.Sprintf("pod-uid-%d", n))
		}
		return false, nil, nil
	})
	return &PodRunner{Client: c, Namespace: "gpu-dra-driver", NodeName: "node-a", Image: "localhost/gpu-dra-driver:t", HostDriverRoot: hostDriverRoot, Poll: time.Millisecond}, c
}

func mounts(c corev1.Container, vols []corev1.Volume) map[string]string {
	host := map[string]string{}
	for _, v := range vols {
		switch {
		case v.HostPath != nil:
			host[v.Name] = v.HostPath.Path
		case v.EmptyDir != nil:
			host[v.Name] = "emptyDir:" + string(v.EmptyDir.Medium) + ":" + v.EmptyDir.SizeLimit.String()
		}
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		out[m.MountPath] = host[m.Name]
	}
	return out
}

// A real GPU's daemon pod chroots into the driver root, read-only, with
// its own directory as the daemon's /tmp (pipe and log directories in it)
// and a size-limited tmpfs as its /dev/shm.
func TestDaemonPodForARealGPU(t *testing.T) {
	r, _ := newPodRunner("/run/nvidia/driver")
	d := (&MPS{Root: "/var/lib/kubelet/plugins/gpu.nvidia.com/mps"}).Daemon(fakeUUID)
	p := r.Pod(d)
	c := p.Spec.Containers[0]
	if p.Spec.NodeName != "node-a" || !p.Spec.HostPID || p.Namespace != "gpu-dra-driver" || c.Image != r.Image {
		t.Fatalf("pod placement: node %q hostPID %v namespace %q image %q", p.Spec.NodeName, p.Spec.HostPID, p.Namespace, c.Image)
	}
	if c.SecurityContext == nil || !*c.SecurityContext.Privileged {
		t.Error("a real daemon pod must be privileged (chroot, GPU device nodes)")
	}
	for _, a := range []string{"--driver-root=/driver-root", "--device=" + fakeUUID, "--pipe-dir=/tmp/pipe", "--log-dir=/tmp/log"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("args %v lack %s", c.Args, a)
		}
	}
	want := map[string]string{
		"/mps":                 d.Dir,
		"/driver-root":         "/run/nvidia/driver",
		"/driver-root/tmp":     d.Dir,
		"/driver-root/dev/shm": "emptyDir:Memory:256Mi",
	}
	got := mounts(c, p.Spec.Volumes)
	if len(got) != len(want) {
		t.Errorf("mounts %v, want %v", got, want)
	}
	for path, host := range want {
		if got[path] != host {
			t.Errorf("mount %s from %q, want %s", path, got[path], host)
		}
	}
	for _, m := range c.VolumeMounts {
		if m.ReadOnly != (m.MountPath == "/driver-root") {
			t.Errorf("mount %s read-only: %v; only the driver root is", m.MountPath, m.ReadOnly)
		}
	}
	if _, limited := c.Resources.Limits[corev1.ResourceMemory]; limited {
		t.Error("a memory limit would kill the MPS server under its clients")
	}
}

// The daemon's mount points inside the read-only driver root are
// directories every root has: the runtime cannot create one there.
func TestDaemonPodMountPointsExistInAnyRoot(t *testing.T) {
	r, _ := newPodRunner("/")
	for _, m := range r.Pod((&MPS{Root: "/s/mps"}).Daemon(fakeUUID)).Spec.Containers[0].VolumeMounts {
		in, ok := strings.CutPrefix(m.MountPath, "/driver-root/")
		if ok && in != "tmp" && in != "dev/shm" {
			t.Errorf("mount point /%s in the read-only driver root may not exist there", in)
		}
	}
}

func TestDaemonPodShmSize(t *testing.T) {
	r, _ := newPodRunner("")
	r.ShmSize = resource.MustParse("64Mi")
	p := r.Pod((&MPS{Root: "/s/mps"}).Daemon(fakeUUID))
	if got := mounts(p.Spec.Containers[0], p.Spec.Volumes)["/dev/shm"]; got != "emptyDir:Memory:64Mi" {
		t.Fatalf("/dev/shm from %q, want a 64Mi emptyDir in memory", got)
	}
}

func TestDaemonPodWhenSimulatedIsUnprivileged(t *testing.T) {
	r, _ := newPodRunner("")
	p := r.Pod((&MPS{Root: "/s/mps"}).Daemon(fakeUUID))
	c := p.Spec.Containers[0]
	if *c.SecurityContext.Privileged || len(p.Spec.Volumes) != 2 || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--driver-root") }) {
		t.Fatalf("simulated daemon pod: privileged %v, volumes %v, args %v", *c.SecurityContext.Privileged, p.Spec.Volumes, c.Args)
	}
}

// Start links the daemon's shm, which clients' CDI specs name, to the
// pod's emptyDir on the host, and follows a replaced pod.
func TestPodRunnerLinksShmToThePodsEmptyDir(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	r.KubeletDir = "/var/lib/k"
	m := &MPS{Root: t.TempDir(), Runner: r}
	d := m.Daemon(fakeUUID)
	if err := makeDirs(d); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	p, _ := c.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	want := "/var/lib/k/pods/" + string(p.UID) + "/volumes/kubernetes.io~empty-dir/shm"
	if got, err := os.Readlink(d.ShmDir()); err != nil || got != want {
		t.Fatalf("shm links to %q (%v), want %s", got, err, want)
	}
	if ClientEdits(d, Settings{}).Mounts[1].HostPath != d.ShmDir() {
		t.Fatal("clients do not get the linked shm")
	}
	p.Status.Phase = corev1.PodFailed
	if _, err := c.CoreV1().Pods(r.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	q, _ := c.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	if got, _ := os.Readlink(d.ShmDir()); q.UID == p.UID || !strings.Contains(got, string(q.UID)) {
		t.Fatalf("after the pod was replaced (%s -> %s), shm links to %s", p.UID, q.UID, got)
	}
}

func TestPodRunnerLifecycle(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	other := &PodRunner{Client: c, Namespace: r.Namespace, NodeName: "node-b", Image: r.Image}
	m := &MPS{Root: t.TempDir()}
	d, e := m.Daemon(fakeUUID), m.Daemon("MIG-GPU-12345678-1234-1234-1234-123456789abc.1.0")
	for _, x := range []*Daemon{d, e} {
		if err := r.Start(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if r.PodName(d.DeviceUUID) == other.PodName(d.DeviceUUID) {
		t.Fatal("two nodes' daemons for one UUID share a pod name")
	}
	names, err := r.List(ctx)
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{d.DeviceUUID, e.DeviceUUID}) {
		t.Fatalf("List: %v %v, want this node's two daemons", names, err)
	}
	if ok, err := r.Running(ctx, d); !ok || err != nil {
		t.Fatalf("Running after Start: %v %v", ok, err)
	}
	// A failed pod is no daemon, and Start replaces it.
	p, _ := c.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	p.Status.Phase = corev1.PodFailed
	if _, err := c.CoreV1().Pods(r.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Running(ctx, d); ok {
		t.Fatal("a failed daemon pod counts as running")
	}
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Running(ctx, d); !ok {
		t.Fatal("Start did not replace the failed pod")
	}
	if err := r.Stop(ctx, d); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Running(ctx, d); ok {
		t.Fatal("daemon pod still there after Stop")
	}
	if err := r.Stop(ctx, d); err != nil {
		t.Fatalf("stopping a stopped daemon: %v", err)
	}
}

// fakeRunner starts daemons that create their control pipe, or not.
type fakeRunner struct {
	running map[string]bool
	pipe    bool
	starts  int
}

func (f *fakeRunner) Start(_ context.Context, d *Daemon) error {
	f.starts++
	f.running[d.DeviceUUID] = true
	if f.pipe {
		return os.WriteFile(d.ControlPipe(), nil, 0o600)
	}
	return nil
}
func (f *fakeRunner) Running(_ context.Context, d *Daemon) (bool, error) {
	return f.running[d.DeviceUUID], nil
}
func (f *fakeRunner) Stop(_ context.Context, d *Daemon) error {
	delete(f.running, d.DeviceUUID)
	return nil
}
func (f *fakeRunner) List(context.Context) ([]string, error) { return nil, errors.New("unused") }

// Clients get the pipe only once the daemon listens on it; a daemon that
// never does is an error naming its log.
func TestEnsureWaitsForTheControlPipe(t *testing.T) {
	f := &fakeRunner{running: map[string]bool{}, pipe: true}
	m := &MPS{Root: t.TempDir(), Runner: f, ReadyTimeout: 200 * time.Millisecond}
	d := m.Daemon(fakeUUID)
	if err := m.Ensure(d); err != nil {
		t.Fatal(err)
	}
	if err := m.Ensure(d); err != nil || f.starts != 1 {
		t.Fatalf("second Ensure: %v, %d starts, want the running daemon reused", err, f.starts)
	}
	for _, dir := range []string{d.PipeDir(), d.LogDir(), d.ShmDir()} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("daemon directory: %v", err)
		}
	}
	if err := m.Stop(d); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Dir); !os.IsNotExist(err) {
		t.Fatal("daemon directory left after Stop")
	}
	f.pipe = false
	err := m.Ensure(d)
	if err == nil || !strings.Contains(err.Error(), "control pipe") || !strings.Contains(err.Error(), filepath.Join(d.Dir, "log")) {
		t.Fatalf("a daemon without a control pipe: %v", err)
	}
}
