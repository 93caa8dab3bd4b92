// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package allocator

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestLinkedVersionIsGoMods: the fallback names the version go.mod links.
func TestLinkedVersionIsGoMods(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+k8s.io/dynamic-resource-allocation (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod does not require k8s.io/dynamic-resource-allocation")
	}
	if string(m[1]) != linkedVersion {
		t.Fatalf("linkedVersion %s, go.mod %s: update version.go", linkedVersion, m[1])
	}
	if got := ModuleVersion(); got != linkedVersion {
		t.Fatalf("ModuleVersion() = %s, want %s", got, linkedVersion)
	}
}

func TestDescribeWarnsOnlyAcrossMinors(t *testing.T) {
	if Minor() != "1.38" {
		t.Fatalf("Minor() = %s", Minor())
	}
	for _, tc := range []struct {
		server string
		warn   bool
	}{
		{"v1.38.0-beta.0", false}, {"v1.38.3-gke.100", false}, {"", false}, {"garbage", false},
		{"v1.37.2", true}, {"v1.36.5+k3s1", true}, {"v1.39.0", true},
	} {
		line, warning := Describe(tc.server)
		if !strings.Contains(line, "Kubernetes 1.38") {
			t.Errorf("%q: line %q does not name 1.38", tc.server, line)
		}
		if (warning != "") != tc.warn {
			t.Errorf("server %q: warning %q, want warning=%v", tc.server, warning, tc.warn)
		}
		if tc.warn && !strings.Contains(warning, tc.server) {
			t.Errorf("warning %q does not name the server's version", warning)
		}
	}
}
