// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"os"
	"strings"
	"testing"
)

// TestCapacitySaysWhichAllocator: a text answer names the Kubernetes minor
// whose allocator it ran, and warns when the recorded cluster runs another
// minor; -o json stays parseable whatever the skew.
func TestCapacitySaysWhichAllocator(t *testing.T) {
	state := fleetState(t)
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server string
		warn   bool
	}{{"", false}, {"v1.38.0-beta.0", false}, {"v1.37.2", true}} {
		path := state + "." + strings.ReplaceAll(tc.server+"x", ".", "-")
		body := string(data)
		if tc.server != "" {
			body = "serverVersion: " + tc.server + "\n" + body
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := runFleet(NewCapacityCommand("gpudra"), "--from", path, "--mig-profile", "1g.10gb")
		if err != nil || !strings.HasPrefix(out, "NODE") || !strings.Contains(out, "allocator of Kubernetes 1.38") {
			t.Errorf("server %q: %v\n%s", tc.server, err, out)
		}
		if got := strings.Contains(out, "warning: the cluster's API server runs Kubernetes "+tc.server); got != tc.warn {
			t.Errorf("server %q: warned %v, want %v\n%s", tc.server, got, tc.warn, out)
		}
		if out, err := runFleet(NewCapacityCommand("gpudra"), "--from", path, "--mig-profile", "1g.10gb", "-o", "json"); err != nil || !strings.HasPrefix(out, "{") || strings.Contains(out, "allocator of") {
			t.Errorf("server %q, -o json: %v\n%s", tc.server, err, out)
		}
	}
}
