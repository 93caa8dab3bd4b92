// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func newPodRunner(hostDriverRoot string) (*PodRunner, *fake.Clientset) {
	c := fake.NewClientset()
	return &PodRunner{Client: c, Namespace: "gpu-dra-driver", NodeName: "node-a", Image: "localhost/gpu-dra-driver:t", HostDriverRoot: hostDriverRoot, Poll: time.Millisecond}, c
}

func mounts(c corev1.Container, vols []corev1.Volume) map[string]string {
	host := map[string]string{}
	for _, v := range vols {
		host[v.Name] = v.HostPath.Path
	}
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		out[m.MountPath] = host[m.Name]
	}
	return out
}

// A real GPU's daemon pod chroots into the driver root with the daemon's
// pipe, log and shm directories where NVIDIA's tools look for them.
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
	if !slices.Contains(c.Args, "--driver-root=/driver-root") || !slices.Contains(c.Args, "--device="+fakeUUID) {
		t.Errorf("args %v", c.Args)
	}
	want := map[string]string{
		"/mps":                            d.Dir,
		"/driver-root":                    "/run/nvidia/driver",
		"/driver-root/tmp/nvidia-mps":     d.PipeDir(),
		"/driver-root/var/log/nvidia-mps": d.LogDir(),
		"/driver-root/dev/shm":            d.ShmDir(),
	}
	got := mounts(c, p.Spec.Volumes)
	for path, host := range want {
		if got[path] != host {
			t.Errorf("mount %s from %q, want %s", path, got[path], host)
		}
	}
	if _, limited := c.Resources.Limits[corev1.ResourceMemory]; limited {
		t.Error("a memory limit would kill the MPS server under its clients")
	}
}

func TestDaemonPodWhenSimulatedIsUnprivileged(t *testing.T) {
	r, _ := newPodRunner("")
	p := r.Pod((&MPS{Root: "/s/mps"}).Daemon(fakeUUID))
	c := p.Spec.Containers[0]
	if *c.SecurityContext.Privileged || len(p.Spec.Volumes) != 1 || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--driver-root") }) {
		t.Fatalf("simulated daemon pod: privileged %v, volumes %v, args %v", *c.SecurityContext.Privileged, p.Spec.Volumes, c.Args)
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
