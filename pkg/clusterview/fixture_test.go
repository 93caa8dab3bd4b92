// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview_test

import (
	"path/filepath"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
)

// loadFixture reads a recorded cluster state of pkg/diagnose's testdata,
// whose verdicts and golden reports TestFixtures checks there: each state
// is recorded once, and read by the one loader both packages' tests share.
func loadFixture(t testing.TB, name string) *clusterviewtest.Fixture {
	t.Helper()
	return clusterviewtest.Load(t, filepath.Join("..", "diagnose", "testdata", name))
}
