// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"flag"
	"os"
	"sync"
	"testing"

	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

var (
	klogOnce sync.Once
	klogFS   = flag.NewFlagSet("klog", flag.ContinueOnError)
)

func klogFlags() *flag.FlagSet {
	klogOnce.Do(func() { klog.InitFlags(klogFS) })
	return klogFS
}

// TestMain lets the test binary double as the simulated MPS daemon and as
// a plugin process the chaos test can kill.
func TestMain(m *testing.M) {
	sharing.RunStandInIfRequested()
	runPluginChildIfRequested()
	os.Exit(m.Run())
}
