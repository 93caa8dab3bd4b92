// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ownprocess runs a test again in a test process of its own, for
// tests that change process-wide state: loading NVIDIA's library makes
// go-nvml describe every nvml.Return with the library's words for the rest
// of the process, which would change what other tests of the package see.
package ownprocess

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

const env = "GDRA_TEST_OWN_PROCESS"

// Run runs the calling test again in a process of its own and reports
// whether it did (the caller then returns); in that process it reports
// false and the test goes on.
func Run(t *testing.T) bool {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	t.Logf("in a process of its own:\n%s", out)
	if err != nil {
		t.Fatalf("%s failed in a process of its own: %v", t.Name(), err)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skip("skipped in its own process")
	}
	return true
}
