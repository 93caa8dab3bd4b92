// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registrationSocket is the helper's registration socket of a node.
func registrationSocket(t *testing.T, n *node) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(n.dir("registry"), "*-reg.sock"))
	if len(matches) != 1 {
		t.Fatalf("registration sockets: %v", matches)
	}
	return matches[0]
}

func TestLivenessFailsWhenTheKubeletCannotUseThePlugin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, n *node)
		want    string
	}{
		{"DRA socket removed", func(t *testing.T, n *node) {
			if err := os.Remove(filepath.Join(n.dir("plugin"), "dra.sock")); err != nil {
				t.Fatal(err)
			}
		}, "DRA socket"},
		{"DRA socket removed, rolling updates on", func(t *testing.T, n *node) {
			if err := os.Remove(n.driver.DRASocket()); err != nil {
				t.Fatal(err)
			}
		}, "DRA socket"},
		{"registration socket removed", func(t *testing.T, n *node) {
			if err := os.Remove(registrationSocket(t, n)); err != nil {
				t.Fatal(err)
			}
		}, "no registration socket"},
		{"kubelet refused the registration", func(t *testing.T, n *node) {
			// What the kubelet does when it rejects a plugin (e.g. an
			// unsupported version): it tells the plugin over the socket.
			conn, err := grpc.NewClient("unix://"+registrationSocket(t, n), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// The helper records the status and answers with the error.
			_, err = registerapi.NewRegistrationClient(conn).NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "unsupported versions"})
			if err == nil || !strings.Contains(err.Error(), "unsupported versions") {
				t.Fatalf("NotifyRegistrationStatus: %v", err)
			}
		}, "unsupported versions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNode(t, "h100x1")
			if strings.Contains(tc.name, "rolling updates") {
				n.podUID = "3e7c7dbc-a625-4e89-95b4-39aa5de9d7e4"
				n.restart("h100x1")
			}
			if err := n.driver.Live(); err != nil {
				t.Fatalf("a started plugin is not live: %v", err)
			}
			tc.breakIt(t, n)
			err := n.driver.Live()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Live() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The chart sets POD_UID, which turns on the helper's rolling updates and
// names the DRA socket dra-<uid>.sock: a probe that looked for dra.sock
// failed on every real deployment, and the kubelet restarted the plugin
// every 40 s.
func TestLiveWithRollingUpdates(t *testing.T) {
	n := newNode(t, "h100x1")
	n.podUID = "3e7c7dbc-a625-4e89-95b4-39aa5de9d7e4"
	n.restart("h100x1")
	if got := filepath.Base(n.driver.DRASocket()); got != "dra-3e7c7dbc-a625-4e89-95b4-39aa5de9d7e4.sock" {
		t.Fatalf("DRA socket %s, want the helper's dra-<pod UID>.sock", got)
	}
	if err := n.driver.Live(); err != nil {
		t.Fatalf("a started plugin with rolling updates is not live: %v", err)
	}
	n.mustPrepare(n.claim("c", []string{"gpu-0"})) // the kubelet's calls reach the same socket
}

func TestLivenessProbesAreNotActivity(t *testing.T) {
	n := newNode(t, "h100x1")
	before := n.driver.Activity()
	for range 3 {
		if err := n.driver.Live(); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.driver.Activity(); got != before {
		t.Fatalf("liveness probes counted as kubelet activity: %d -> %d", before, got)
	}
	n.mustPrepare(n.claim("c", []string{"gpu-0"}))
	if n.driver.Activity() == before {
		t.Fatal("a prepare is not counted as activity")
	}
}
