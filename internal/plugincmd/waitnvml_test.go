// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-logr/logr/funcr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/ownprocess"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// plugin is the command running in the test, as the binary runs it, with
// an in-process API server and its log captured.
type plugin struct {
	t      *testing.T
	client *fake.Clientset
	addr   string
	done   chan error
	cancel context.CancelFunc
	mu     sync.Mutex
	log    []string
}

// startPlugin runs the command with args plus a node name, directories
// under a temporary root and the probes on a free port.
func startPlugin(t *testing.T, o *options, args ...string) *plugin {
	t.Helper()
	// Unix socket paths are limited to 108 bytes; keep the root short.
	root, err := os.MkdirTemp("", "gdra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &plugin{t: t, client: fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}}), addr: l.Addr().String(), done: make(chan error, 1)}
	l.Close()
	o.clients = func() (kubernetes.Interface, kubernetes.Interface, error) { return p.client, p.client, nil }
	logger := funcr.New(func(_, args string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.log = append(p.log, args)
	}, funcr.Options{})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	p.cancel = cancel
	cmd := commandFor(o)
	cmd.SetArgs(append([]string{"--node-name", "n1", "--kubelet-dir", filepath.Join(root, "kubelet"), "--cdi-root", filepath.Join(root, "cdi"),
		"--http-endpoint", p.addr}, args...))
	go func() { p.done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(p.stop)
	return p
}

// stop ends the plugin; it must end without an error.
func (p *plugin) stop() {
	p.cancel()
	if err := testwait.Receive(p.t, p.done, "the plugin to stop"); err != nil {
		p.t.Errorf("the plugin ended with %v", err)
	}
	p.done <- nil // for a second stop
}

// get returns a probe's status code and body.
func (p *plugin) get(path string) (int, string) {
	resp, err := http.Get("http://" + p.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor polls cond until it holds; the plugin must not exit meanwhile.
func (p *plugin) waitFor(what string, cond func() bool) {
	p.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); !cond(); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-p.done:
			p.t.Fatalf("the plugin exited (%v) while waiting for %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s; log:\n%s", what, strings.Join(p.logLines(""), "\n"))
		}
	}
}

// logLines returns the captured lines whose message contains msg.
func (p *plugin) logLines(msg string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.log {
		if strings.Contains(l, `"msg"="`+msg) {
			out = append(out, l)
		}
	}
	return out
}

// events returns the Node events with reason.
func (p *plugin) events(reason string) []v1.Event {
	list, err := p.client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	var out []v1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == "n1" {
			out = append(out, e)
		}
	}
	return out
}

var attemptRE = regexp.MustCompile(`\(attempt (\d+), next in `)

// attempt is the attempt /readyz reports, 0 when it reports none.
func (p *plugin) attempt() int {
	_, body := p.get("/readyz")
	if m := attemptRE.FindStringSubmatch(body); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// TestWaitsForNVMLWithNVIDIAsLibrary starts the plugin on NVIDIA's real
// R535 userspace on a machine without the kernel module, as on a node
// whose GPU Operator driver pod has not loaded it yet: nvmlInit fails
// with DRIVER_NOT_LOADED. The plugin must stay up, live and not ready,
// say so once in its log and once in a Node event, and keep trying.
func TestWaitsForNVMLWithNVIDIAsLibrary(t *testing.T) {
	root := os.Getenv("GDRA_NVIDIA_HOST_ROOT")
	if root == "" {
		t.Skip("GDRA_NVIDIA_HOST_ROOT is not set: run `make test`, which unpacks NVIDIA's R535 userspace with hack/nvidia-userspace.sh and sets it")
	}
	if _, err := os.Stat("/proc/driver/nvidia/version"); err == nil {
		t.Skip("this machine has the NVIDIA kernel module loaded; the test needs one without")
	}
	if ownprocess.Run(t) {
		return
	}
	p := startPlugin(t, &options{}, "--driver-root", root, "--nvml-retry-interval", "5ms", "--nvml-retry-max-interval", "20ms")
	p.waitFor("five tries to initialize NVML", func() bool { return p.attempt() >= 5 })
	if code, body := p.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while waiting for NVML: %d %s, want 200: a restart does not load the kernel module", code, body)
	}
	code, body := p.get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "Driver Not Loaded") || !strings.Contains(body, "kernel module") || !strings.Contains(body, "libnvidia-ml.so.535") {
		t.Errorf("/readyz while waiting for NVML: %d %q, want 503 naming the library, the missing driver and what to check", code, body)
	}
	if lines := p.logLines("Waiting for NVML"); len(lines) != 1 || !strings.Contains(lines[0], "Driver Not Loaded") || !strings.Contains(lines[0], `"check"="is the NVIDIA kernel module loaded`) {
		t.Errorf("log lines about waiting for NVML: %q, want one for the one cause, with what to check", lines)
	}
	if evs := p.events(reasonNVMLNotReady); len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || !strings.Contains(evs[0].Message, "Driver Not Loaded") {
		t.Errorf("%s events: %+v, want one Warning naming the missing driver", reasonNVMLNotReady, evs)
	} else {
		t.Logf("event: %s %s: %s", evs[0].Type, evs[0].Reason, evs[0].Message)
	}
	t.Logf("/readyz: %d %s", code, body)
}

// TestStartsWhenNVMLBecomesReady: NVML becomes usable after a few tries
// (first no library, then no kernel module): the same process then
// discovers the GPUs, publishes them and turns ready.
func TestStartsWhenNVMLBecomesReady(t *testing.T) {
	var tries atomic.Int32
	o := &options{openBackend: func(bo backend.Options) (*backend.Backend, error) {
		switch n := tries.Add(1); {
		case n <= 2:
			return nil, &nvdev.NotReadyError{Err: errors.New(`libnvidia-ml.so.1 not found under driver root "/run/nvidia/driver"`), Hint: "is the NVIDIA driver installed?"}
		case n <= 4:
			return nil, &nvdev.NotReadyError{Library: "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.1", Return: nvml.ERROR_DRIVER_NOT_LOADED}
		}
		bo.SimulateProfile = "h100x2"
		return backend.Open(bo)
	}}
	p := startPlugin(t, o, "--driver-root", "/run/nvidia/driver", "--nvml-retry-interval", "5ms", "--nvml-retry-max-interval", "20ms")
	p.waitFor("/readyz to pass", func() bool { code, _ := p.get("/readyz"); return code == http.StatusOK })
	p.waitFor("the GPUs to be published", func() bool {
		slices, err := p.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		devices := 0
		for _, s := range slices.Items {
			devices += len(s.Spec.Devices)
		}
		return devices > 0
	})
	if n := tries.Load(); n != 5 {
		t.Errorf("%d tries to open NVML, want 5", n)
	}
	waiting := p.logLines("Waiting for NVML")
	if len(waiting) != 2 || !strings.Contains(waiting[0], "not found under driver root") || !strings.Contains(waiting[1], "ERROR_DRIVER_NOT_LOADED") {
		t.Errorf("log lines about waiting: %q, want one per cause: the library, then the kernel module", waiting)
	}
	if n := len(p.logLines("NVML is ready; starting")); n != 1 {
		t.Errorf("%d lines say NVML is ready, want 1", n)
	}
	if n := len(p.logLines("GPU kubelet plugin running")); n != 1 {
		t.Errorf("%d lines say the plugin runs, want 1 (one process, no restart)", n)
	}
	if notReady, ready := p.events(reasonNVMLNotReady), p.events(reasonNVMLReady); len(notReady) != 2 || len(ready) != 1 || ready[0].Type != v1.EventTypeNormal {
		t.Errorf("events: %d %s, %d %s; want one per cause and one Normal when ready", len(notReady), reasonNVMLNotReady, len(ready), reasonNVMLReady)
	}
}

// TestOtherStartErrorsStillEndTheStart: only NVML not being ready is
// waited for.
func TestOtherStartErrorsStillEndTheStart(t *testing.T) {
	o := &options{openBackend: func(backend.Options) (*backend.Backend, error) {
		return nil, fmt.Errorf("discover GPUs: boom")
	}}
	p := startPlugin(t, o)
	if err := testwait.Receive(t, p.done, "the start to fail"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("start ended with %v, want the discovery error", err)
	}
	p.done <- nil
}
