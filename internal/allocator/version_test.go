// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package allocator

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestLinkedVersion: the binary links the version its adapter file is
// written for, and the 1.38 one's is the version go.mod requires (the 1.37
// one's module file is derived from it: hack/allocator/k8s137.sh).
func TestLinkedVersion(t *testing.T) {
	if got := ModuleVersion(); got != linkedVersion {
		t.Fatalf("ModuleVersion() = %s, want %s", got, linkedVersion)
	}
	if !sharesByDevice { // the k8s137 build: go.mod is not the module file
		return
	}
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+k8s.io/dynamic-resource-allocation (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod does not require k8s.io/dynamic-resource-allocation")
	}
	if string(m[1]) != linkedVersion {
		t.Fatalf("linkedVersion %s, go.mod %s: update k8s138.go", linkedVersion, m[1])
	}
}

func TestDescribeWarnsOnlyAcrossMinors(t *testing.T) {
	want := "1." + strings.Split(linkedVersion, ".")[1]
	if Minor() != want {
		t.Fatalf("Minor() = %s, want %s", Minor(), want)
	}
	m, _ := strconv.Atoi(strings.Split(linkedVersion, ".")[1])
	for _, tc := range []struct {
		server string
		warn   bool
	}{
		{fmt.Sprintf("v1.%d.0-beta.0", m), false}, {fmt.Sprintf("v1.%d.3-gke.100", m), false}, {"", false}, {"garbage", false},
		{fmt.Sprintf("v1.%d.2", m-1), true}, {fmt.Sprintf("v1.%d.5+k3s1", m-2), true}, {fmt.Sprintf("v1.%d.0", m+1), true},
	} {
		line, warning := Describe(tc.server)
		if !strings.Contains(line, "Kubernetes "+want) {
			t.Errorf("%q: line %q does not name %s", tc.server, line, want)
		}
		if (warning != "") != tc.warn {
			t.Errorf("server %q: warning %q, want warning=%v", tc.server, warning, tc.warn)
		}
		if tc.warn && !strings.Contains(warning, tc.server) {
			t.Errorf("warning %q does not name the server's version", warning)
		}
	}
}
