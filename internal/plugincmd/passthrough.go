// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// parsePassthrough reads --passthrough-gpus: empty (no passthrough),
// "all", or GPUs by PCI address (0000:3b:00.0, or 3b:00.0 in domain 0)
// or minor number. Names that match no GPU are refused at start, once the
// GPUs are known (driver.Start).
func parsePassthrough(values []string) (resourceslices.PassthroughSelector, error) {
	var sel resourceslices.PassthroughSelector
	for _, v := range values {
		v = strings.ToLower(strings.TrimSpace(v))
		switch {
		case v == "":
			continue
		case v == "all":
			sel.All = true
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && strconv.Itoa(n) == v {
			sel.Names = append(sel.Names, v)
			continue
		}
		// nvidia-smi's 00000000:3B:00.0 and lspci's 3b:00.0 alike.
		v = nvdev.NormalizePCIBusID(v)
		if strings.Count(v, ":") == 1 {
			v = "0000:" + v
		}
		if !vfio.ValidAddress(v) {
			return sel, fmt.Errorf("--passthrough-gpus: %q is neither a PCI address (0000:3b:00.0) nor a GPU minor number (3); use 'all' to offer every GPU (chart value passthrough.gpus)", v)
		}
		sel.Names = append(sel.Names, v)
	}
	if sel.All && len(sel.Names) > 0 {
		return sel, fmt.Errorf("--passthrough-gpus: 'all' and a list of GPUs (%v) exclude each other; give one of them", sel.Names)
	}
	return sel, nil
}
