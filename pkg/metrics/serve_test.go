// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestHealthzAndReadyzReportWhatTheirChecksSay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var liveErr, readyErr atomic.Pointer[error]
	check := func(p *atomic.Pointer[error]) func() error {
		return func() error {
			if e := p.Load(); e != nil {
				return *e
			}
			return nil
		}
	}
	addr, err := New().Serve(ctx, "127.0.0.1:0", check(&liveErr), check(&readyErr))
	if err != nil {
		t.Fatal(err)
	}
	healthz, readyz := "http://"+addr.String()+"/healthz", "http://"+addr.String()+"/readyz"
	for _, url := range []string{healthz, readyz} {
		if code, body := get(t, url); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("%s healthy: %d %q", url, code, body)
		}
	}
	e := errors.New("health monitor not watching yet")
	readyErr.Store(&e)
	if code, body := get(t, readyz); code != http.StatusServiceUnavailable || !strings.Contains(body, "not watching yet") {
		t.Fatalf("not ready: %d %q", code, body)
	}
	if code, _ := get(t, healthz); code != http.StatusOK {
		t.Fatalf("a plugin that is not ready yet is still live: /healthz %d", code)
	}
	e = errors.New("no registration socket")
	liveErr.Store(&e)
	if code, body := get(t, healthz); code != http.StatusServiceUnavailable || !strings.Contains(body, "no registration socket") {
		t.Fatalf("unhealthy: %d %q", code, body)
	}
}

func TestMetricsAreScrapedFromTheRegistry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New()
	var held atomic.Int64
	held.Store(3)
	m.ObservePreparedDevices(func() int { return int(held.Load()) })
	m.Errors.WithLabelValues("prepare").Inc()
	m.PrepareDuration.Observe(0.004)
	addr, err := m.Serve(ctx, "127.0.0.1:0", func() error { return nil }, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	held.Store(5) // computed at scrape time, not at registration
	_, body := get(t, "http://"+addr.String()+"/metrics")
	for _, want := range []string{
		"gpu_dra_prepared_devices 5",
		`gpu_dra_errors_total{operation="prepare"} 1`,
		`gpu_dra_prepare_duration_seconds_bucket{le="0.005"} 1`,
		`gpu_dra_prepare_duration_seconds_bucket{le="0.002"} 0`,
		"gpu_dra_discovery_failed_gpus_total",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestServeFailsOnABusyPortAndStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := New().Serve(ctx, "127.0.0.1:0", func() error { return nil }, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New().Serve(context.Background(), addr.String(), func() error { return nil }, func() error { return nil }); err == nil {
		t.Fatal("a second server on the same port did not fail")
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := net.Listen("tcp", addr.String())
		if err == nil {
			l.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the port stayed taken after the context ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
