// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// TestPluginProbes asks the deployed plugin's /healthz and /readyz what the
// kubelet's probes ask. The chart turns on rolling updates (POD_UID), which
// renames the DRA socket; a liveness check that missed it failed on every
// chart deployment and the kubelet restarted the plugin every ~40 s.
func TestPluginProbes(t *testing.T) {
	pods := pluginPodList(t)
	if len(pods) == 0 {
		t.Fatal("no plugin pod")
	}
	httpClient := &http.Client{Timeout: 10 * time.Second}
	for _, p := range pods {
		c := p.Spec.Containers[0]
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
			t.Fatalf("pod %s: the chart gives the plugin HTTP liveness and readiness probes", p.Name)
		}
		for _, path := range []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path} {
			url := fmt.Sprintf("http://%s:%d%s", p.Status.PodIP, c.LivenessProbe.HTTPGet.Port.IntValue(), path)
			resp, err := httpClient.Get(url)
			if err != nil {
				t.Fatalf("pod %s: %v", p.Name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("pod %s: %s answered %d: %s", p.Name, url, resp.StatusCode, body)
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			if st.RestartCount > 0 {
				t.Logf("pod %s: container %s restarted %d times (last: %v)", p.Name, st.Name, st.RestartCount, st.LastTerminationState.Terminated)
			}
		}
	}
}
