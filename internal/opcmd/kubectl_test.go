// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/spf13/pflag"
)

// apiServer records the paths asked of it; it answers a list of a
// resource with no items and anything else with 404.
type apiServer struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

var lists = []string{"resourceslices", "resourceclaims", "devicetaintrules", "deviceclasses", "pods", "nodes", "events", "daemonsets"}

func newAPIServer(t *testing.T) *apiServer {
	s := &apiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if slices.Contains(lists, path.Base(r.URL.Path)) {
			fmt.Fprint(w, `{"metadata":{},"items":[]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.paths
	s.paths = nil
	return p
}

// TestKubectlFlags: --kubeconfig, --context and -n choose the cluster and
// the namespace as they do for kubectl: the current context's server
// without --context, the named context's with it, and a NAME without a
// namespace in -n, else the context's namespace.
func TestKubectlFlags(t *testing.T) {
	a, b := newAPIServer(t), newAPIServer(t)
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, fmt.Appendf(nil, `apiVersion: v1
kind: Config
current-context: a
clusters:
- {name: a, cluster: {server: %q}}
- {name: b, cluster: {server: %q}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u, namespace: team-b}}
`, a.URL, b.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		onA, onB string // a path asked of each server, "" for none
		fails    bool   // the server has no such object
	}{
		{[]string{"diagnose", "pod", "train"}, "/api/v1/namespaces/default/pods/train", "", true},
		{[]string{"diagnose", "pod", "train", "-n", "ml"}, "/api/v1/namespaces/ml/pods/train", "", true},
		{[]string{"diagnose", "pod", "train", "--context", "b"}, "", "/api/v1/namespaces/team-b/pods/train", true},
		{[]string{"diagnose", "claim", "ml/c", "--context=b"}, "", "/api/v1/namespaces/ml/events", true},
		{[]string{"usage", "--context", "b"}, "", "/apis/resource.k8s.io/v1/resourceslices", false},
		{[]string{"usage"}, "/apis/resource.k8s.io/v1/resourceslices", "", false},
		{[]string{"capacity", "--template", "one-h100", "-n", "ml"}, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/one-h100", "", true},
		{[]string{"capacity", "--template", "one-h100", "--context", "b"}, "", "/apis/resource.k8s.io/v1/namespaces/team-b/resourceclaimtemplates/one-h100", true},
		{[]string{"capacity", "--template", "ml/one-h100", "--context", "b"}, "", "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaimtemplates/one-h100", true},
	} {
		root := NewRoot("kubectl gpu", "")
		root.AddCommand(Commands("kubectl gpu")...)
		root.SetArgs(append(tc.args, "--kubeconfig", kubeconfig, "--timeout", "5s"))
		root.SetOut(new(nopWriter))
		root.SetErr(new(nopWriter))
		err := root.Execute()
		if (err != nil) != tc.fails {
			t.Errorf("%v: error %v, want one: %v", tc.args, err, tc.fails)
		}
		for _, s := range []struct {
			name, want string
			got        []string
		}{{"a", tc.onA, a.take()}, {"b", tc.onB, b.take()}} {
			if s.want == "" && len(s.got) > 0 || s.want != "" && !slices.Contains(s.got, s.want) {
				t.Errorf("%v: server %s was asked %q, want %q", tc.args, s.name, s.got, s.want)
			}
		}
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// TestFlagsAreKubectls: the commands take kubectl's cluster flags, with
// kubectl's short names.
func TestFlagsAreKubectls(t *testing.T) {
	for _, cmd := range Commands("kubectl gpu") {
		flags := cmd.Flags()
		if cmd.Name() == "diagnose" {
			flags = cmd.PersistentFlags()
		}
		for name, short := range map[string]string{"kubeconfig": "", "context": "", "namespace": "n", "cluster": "", "user": "",
			"server": "s", "token": "", "as": "", "as-group": "", "request-timeout": "", "insecure-skip-tls-verify": "",
			"certificate-authority": "", "output": "o", "timeout": "", "from": "", "driver-name": ""} {
			f := flags.Lookup(name)
			if f == nil || f.Shorthand != short {
				t.Errorf("%s: flag --%s: %v, want shorthand %q", cmd.Name(), name, describe(f), short)
			}
		}
	}
}

func describe(f *pflag.Flag) string {
	if f == nil {
		return "missing"
	}
	return "shorthand " + f.Shorthand
}
