// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// TestVersionCommand: `version` prints the client's build and, from the
// plugin pods the chart's labels select, each image the cluster runs with
// its tag and pod count; --client reads nothing; --version on the root
// prints the build too.
func TestVersionCommand(t *testing.T) {
	var selectors []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/pods" {
			http.NotFound(w, r)
			return
		}
		selectors = append(selectors, r.URL.Query().Get("labelSelector"))
		w.Header().Set("Content-Type", "application/json")
		pod := func(ns, name, image string) string {
			return fmt.Sprintf(`{"metadata":{"namespace":%q,"name":%q},"spec":{"containers":[{"name":"sidecar","image":"x"},{"name":"plugin","image":%q}]}}`, ns, name, image)
		}
		fmt.Fprintf(w, `{"metadata":{},"items":[%s,%s,%s]}`,
			pod("gpu", "a", "registry.example:5000/gpu-dra-driver:0.2.0"),
			pod("gpu", "b", "registry.example:5000/gpu-dra-driver:0.2.0"),
			pod("gpu", "c", "registry.example:5000/gpu-dra-driver:0.3.0"))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- {name: a, cluster: {server: %q}}\nusers:\n- {name: u, user: {token: t}}\ncontexts:\n- {name: a, context: {cluster: a, user: u}}\n", srv.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		root := NewRoot("kubectl gpu", "")
		AddVersion(root, "kubectl gpu")
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		if args[0] == "version" {
			args = append(args, "--kubeconfig", kubeconfig)
		}
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("version")
	if err != nil {
		t.Fatal(err)
	}
	want := "Client: kubectl gpu " + version.Get().String() + "\n" +
		"Driver: 0.2.0 (image registry.example:5000/gpu-dra-driver:0.2.0, namespace gpu, 2 plugin pods)\n" +
		"Driver: 0.3.0 (image registry.example:5000/gpu-dra-driver:0.3.0, namespace gpu, 1 plugin pod)\n"
	if out != want {
		t.Errorf("version printed\n%s\nwant\n%s", out, want)
	}
	if len(selectors) != 1 || selectors[0] != PluginPodSelector {
		t.Errorf("pods listed with selectors %q, want %q once", selectors, PluginPodSelector)
	}

	out, err = run("version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r versionReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Client != version.Get() || len(r.Drivers) != 2 || r.Drivers[0].Pods != 2 || r.Drivers[1].Version != "0.3.0" {
		t.Errorf("json: %+v", r)
	}

	selectors = nil
	if out, err = run("version", "--client"); err != nil || strings.Contains(out, "Driver") || len(selectors) != 0 {
		t.Errorf("--client: %v, asked the cluster %d times, printed %q", err, len(selectors), out)
	}
	if out, err = run("--version"); err != nil || !strings.Contains(out, version.Get().String()) {
		t.Errorf("--version: %v, %q", err, out)
	}
	if _, err = run("version", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("-o yaml: %v, want an error naming --output", err)
	}
}

func TestImageTag(t *testing.T) {
	for image, want := range map[string]string{
		"localhost/gpu-dra-driver:0.2.0":            "0.2.0",
		"registry:5000/gpu-dra-driver":              "",
		"registry:5000/gpu-dra-driver:1244c00-ab12": "1244c00-ab12",
		"gpu-dra-driver@sha256:0123":                "sha256:0123",
	} {
		if got := imageTag(image); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", image, got, want)
		}
	}
}
