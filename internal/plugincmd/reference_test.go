// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/refdriver"
)

// TestReadyzWhileReferenceDriverClaims runs the command on a node whose
// plugin directory holds NVIDIA's reference driver's checkpoint with a
// prepared claim (pkg/refdriver's v1 fixture: no claim name, so only the
// kubelet's unprepare can say it is gone). Since issue 51 the plugin takes
// the claim over instead of waiting: it starts and publishes its GPUs (the
// held one as held), stays live, and is not ready while it holds a claim of
// NVIDIA's: /readyz, one log line and one Node event name the claim and the
// checkpoint. The release by the kubelet's unprepare is
// pkg/driver's TestTakesOverReferenceDriverClaims.
func TestReadyzWhileReferenceDriverClaims(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("..", "..", "pkg", "refdriver", "testdata", "checkpoint-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var checkpoint string
	o := &options{referencePoll: 10 * time.Millisecond, openBackend: func(bo backend.Options) (*backend.Backend, error) {
		// The plugin directory is the state dir by default, as in the chart.
		checkpoint = filepath.Join(bo.StateDir, refdriver.CheckpointFile)
		if err := os.MkdirAll(bo.StateDir, 0o750); err != nil {
			return nil, err
		}
		if err := os.WriteFile(checkpoint, fixture, 0o600); err != nil {
			return nil, err
		}
		bo.SimulateProfile = "h100x1"
		return backend.Open(bo)
	}}
	p := startPlugin(t, o)
	p.waitFor("/readyz to say why", func() bool { _, body := p.get("/readyz"); return strings.Contains(body, "reference DRA driver") })
	code, body := p.get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "holding 1 claim(s)") || !strings.Contains(body, "uid 7c2d9e40-8a1b-4c3d-9e5f-0a1b2c3d4e01") || !strings.Contains(body, checkpoint) {
		t.Errorf("/readyz: %d %q, want 503 naming the held claim and the file", code, body)
	}
	if code, body := p.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while holding: %d %s, want 200: a restart changes nothing", code, body)
	}
	time.Sleep(100 * time.Millisecond) // several polls: still one line, one event
	if lines := p.logLines("Taking over NVIDIA's reference driver's claims in use"); len(lines) != 1 {
		t.Errorf("log lines: %q, want one", lines)
	}
	if evs := p.events(driver.ReasonReferenceDriverClaims); len(evs) != 1 || evs[0].Type != v1.EventTypeWarning {
		t.Errorf("%s events: %+v, want one Warning", driver.ReasonReferenceDriverClaims, evs)
	} else {
		t.Logf("event: %s", evs[0].Message)
	}
	p.waitFor("the GPUs to be published while the claim is held", func() bool {
		list, _ := p.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
		return len(list.Items) > 0
	})
	if n := len(p.logLines("GPU kubelet plugin running")); n != 1 {
		t.Errorf("%d lines say the plugin runs, want 1", n)
	}
	if evs := p.events(driver.ReasonReferenceDriverClaimsGone); len(evs) != 0 {
		t.Errorf("%s events while the claim is held: %d, want none", driver.ReasonReferenceDriverClaimsGone, len(evs))
	}
}
