// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	k8stesting "k8s.io/client-go/testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// TestGatherReadsNothingThroughAProxy: the CLI needs no pods/proxy and no
// nodes/proxy (the latter reaches the kubelet's whole API): no request of
// any diagnosis goes through the API server's proxy, neither through the
// typed client (the fake records each action) nor through the raw REST
// client (the test server records each path). The diagnosis says what it
// could therefore not read.
func TestGatherReadsNothingThroughAProxy(t *testing.T) {
	for _, target := range []clusterview.Target{
		{Kind: "pod", Namespace: "ns", Name: "p"},
		{Kind: "claim", Namespace: "ns", Name: "p-gpu-x"},
		{Kind: "node", Name: "vm"},
	} {
		t.Run(target.Kind, func(t *testing.T) {
			var mu sync.Mutex
			var paths []string
			record := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.Path)
				mu.Unlock()
				serveKubeletMetrics(w, r)
			}
			cs, proxied := newGatherClient(t, record, gatherObjects()...)
			s, err := clusterview.Gather(context.Background(), cs, "gpu.nvidia.com", target)
			if err != nil {
				t.Fatal(err)
			}
			if len(*proxied) > 0 {
				t.Errorf("pod proxy requests: %q", *proxied)
			}
			mu.Lock()
			for _, p := range paths {
				if strings.Contains(p, "/proxy") {
					t.Errorf("request through the API server's proxy: %s", p)
				}
			}
			mu.Unlock()
			for _, a := range cs.Actions() {
				if a.GetSubresource() == "proxy" || strings.Contains(a.GetResource().Resource, "proxy") {
					t.Errorf("proxy action: %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
				}
				if pa, ok := a.(k8stesting.ProxyGetAction); ok {
					t.Errorf("proxy get: %s %s", pa.GetName(), pa.GetPath())
				}
			}
			if len(s.PluginMetrics) != 0 || len(s.KubeletMetrics) != 0 {
				t.Errorf("metrics read: %q %q", s.PluginMetrics, s.KubeletMetrics)
			}
			if target.Kind != "claim" {
				said := false
				for _, u := range s.Unreadable {
					said = said || strings.Contains(u, "metrics") && strings.Contains(u, "proxy")
				}
				if !said {
					t.Errorf("the snapshot does not say that metrics were not read: %q", s.Unreadable)
				}
			}
		})
	}
}
