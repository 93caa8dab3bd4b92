// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"fmt"
	"io"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// noteAllocator tells, after a text answer and on standard error (-o json
// and yaml stay what they were), which Kubernetes minor's allocator capacity and diagnose simulate,
// and warns when the cluster runs another minor: their answers are the
// allocator's they were compiled with, whatever the cluster's scheduler.
func noteAllocator(stderr io.Writer, snap *clusterview.Snapshot) {
	line, warning := allocator.Describe(snap.ServerVersion)
	fmt.Fprintln(stderr, "# "+line)
	if warning != "" {
		fmt.Fprintln(stderr, warning)
	}
}
