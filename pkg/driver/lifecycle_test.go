// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// refusingAPI is a client of an API server address nobody listens on.
func refusingAPI(t *testing.T) kubernetes.Interface {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://" + addr})
}

// hangingAPI is a client of an API server that accepts every request and
// never answers it.
func hangingAPI(t *testing.T) kubernetes.Interface {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
}

// rebootNode does to a stopped node what a reboot does: the simulated GPUs
// lose their MIG devices and compute policies and get a new boot ID, and
// the CDI directory is emptied.
func rebootNode(t *testing.T, n *node, profile string) {
	t.Helper()
	p, err := simulate.ParseProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := simulate.New(p, testNode, filepath.Join(n.dir("state"), "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Reboot(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n.dir("cdi")); err != nil {
		t.Fatal(err)
	}
}

// timedStart starts the plugin and says how long Start took.
func timedStart(n *node, profile string) time.Duration {
	start := time.Now()
	n.start(profile)
	return time.Since(start)
}

// TestStartDoesNotWaitForTheAPIServer (issue 20, defects 1 and 2): after a
// reboot, a node with 56 prepared MIG claims (8 H100s x 7 1g.10gb) starts
// within seconds whether the API server refuses connections or accepts
// them and never answers: every claim is restored from local state (MIG
// devices re-created, CDI specs rewritten), the plugin is live at once and
// ready only once its slices are published. When the API server is back,
// the kubelet's prepares answer the same IDs.
func TestStartDoesNotWaitForTheAPIServer(t *testing.T) {
	const profile = "h100x8"
	n := newMigNode(t, profile)
	var ids [][]string
	var claims []string
	for gpu := range 8 {
		for start := range 7 {
			name := fmt.Sprintf("mig-%d-%d", gpu, start)
			c := n.claim(name, []string{fmt.Sprintf("gpu-%d-mig-1g10gb-19-%d", gpu, start)})
			ids = append(ids, n.mustPrepare(c))
			claims = append(claims, name)
		}
	}
	n.stop()
	rebootNode(t, n, profile)

	for _, api := range []struct {
		name   string
		client func(*testing.T) kubernetes.Interface
	}{{"refusing", refusingAPI}, {"hanging", hangingAPI}} {
		n.api = api.client(t)
		took := timedStart(n, profile)
		t.Logf("start with 56 prepared MIG claims, API server %s (first start after the reboot restores them: %v): %s", api.name, api.name == "refusing", took)
		if took > 10*time.Second {
			t.Errorf("start took %s with the API server %s", took, api.name)
		}
		if err := n.driver.Live(); err != nil {
			t.Errorf("API server %s: not live: %v", api.name, err)
		}
		// Once the health monitor watches, what is left is the API server.
		var ready error
		for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
			if ready = n.driver.Ready(); ready == nil || strings.Contains(ready.Error(), "not published") {
				break
			}
		}
		if ready == nil || !strings.Contains(ready.Error(), "not published") {
			t.Errorf("API server %s: ready %v, want not ready until slices are published", api.name, ready)
		}
		sim := n.driver.cfg.Backend.Simulator
		for _, g := range n.driver.cfg.Backend.Inventory.GPUs {
			if got := sim.MigInstanceCount(g.UUID); got != 7 {
				t.Errorf("API server %s: GPU %s has %d MIG devices, want the 7 restored", api.name, g.UUID, got)
			}
		}
		specs, _ := filepath.Glob(filepath.Join(n.dir("cdi"), "k8s."+testDriver+"-claim_*.json"))
		if len(specs) != 56 {
			t.Errorf("API server %s: %d CDI specs, want 56", api.name, len(specs))
		}
		n.stop()
	}

	n.api = nil
	n.start(profile)
	deadline := time.Now().Add(30 * time.Second)
	for n.driver.Ready() != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.driver.Ready(); err != nil {
		t.Fatalf("not ready with the API server back: %v", err)
	}
	for i, name := range claims {
		got := n.mustPrepare(n.claimObj(name))
		if strings.Join(got, ",") != strings.Join(ids[i], ",") {
			t.Errorf("claim %s: CDI IDs %v after the reboot, want %v", name, got, ids[i])
		}
	}
}

// stuckRunner starts MPS daemons that never become ready.
type stuckRunner struct{ sharing.ProcessRunner }

func (stuckRunner) Start(context.Context, *sharing.Daemon) error { return nil }

// TestStartDoesNotWaitForMPSDaemons (defect 3): a restored claim's MPS
// daemon that does not come up (its pod cannot start, the driver is not
// ready yet) does not hold start: the claim's CDI spec is rewritten at
// once, and the supervisor starts the daemon in the background.
func TestStartDoesNotWaitForMPSDaemons(t *testing.T) {
	n := newNode(t, "h100x2")
	c := n.claim("mps", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`)
	ids := n.mustPrepare(c)
	n.stop()
	n.stopMPSDaemons()
	rebootNode(t, n, "h100x2")
	n.mpsRunner = stuckRunner{}
	took := timedStart(n, "h100x2")
	t.Logf("start with one prepared MPS claim whose daemon never comes up: %s", took)
	if took > 10*time.Second {
		t.Errorf("start waited %s for the MPS daemon", took)
	}
	spec, err := os.ReadFile(n.specPath(c))
	if err != nil {
		t.Fatalf("CDI spec not rewritten at start: %v", err)
	}
	if !strings.Contains(string(spec), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M") {
		t.Errorf("rewritten CDI spec lacks the claim's MPS limit:\n%s", spec)
	}
	if got := n.mustPrepare(c); strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("CDI IDs %v after the reboot, want %v", got, ids)
	}
}

// TestStopBeforeTheFirstPublishIsNoError: a plugin stopped while its first
// publish still waits for the API server (here refusing connections, as
// when a node's plugin is restarted during an outage) ends that wait by
// stopping; that is the stop, not a publishing failure, so nothing is
// counted as a background error or logged as one (the offline demo printed
// "Publishing ResourceSlices ... DRA plugin was stopped" at every exit).
func TestStopBeforeTheFirstPublishIsNoError(t *testing.T) {
	n := newNode(t, "h100x8")
	n.api = refusingAPI(t)
	n.restart("h100x8")
	d := n.driver
	if d.published.Load() {
		t.Fatal("published with the API server refusing")
	}
	n.in.Stop() // Driver.Stop; the caller's context lives on, as a process's does until main returns
	select {
	case <-d.publishStarted:
	case <-time.After(30 * time.Second):
		t.Fatal("the first publish did not return after Stop")
	}
	var m dto.Metric
	if err := d.cfg.Metrics.Errors.WithLabelValues("background").Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 0 {
		t.Errorf("%v background errors from a stop before the first publish, want 0", got)
	}
}
