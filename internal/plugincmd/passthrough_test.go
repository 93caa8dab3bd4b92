// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestPassthroughFlag(t *testing.T) {
	for in, want := range map[string][]string{
		"0000:3B:00.0,3":   {"0000:3b:00.0", "3"},
		"3b:00.0":          {"0000:3b:00.0"},
		"00000000:3B:00.0": {"0000:3b:00.0"}, // nvidia-smi --query-gpu=pci.bus_id
	} {
		sel, err := parsePassthrough(strings.Split(in, ","))
		if err != nil || sel.All || !slices.Equal(sel.Names, want) {
			t.Errorf("%s: %+v %v, want %v", in, sel, err, want)
		}
	}
	if sel, err := parsePassthrough([]string{"all"}); err != nil || !sel.All {
		t.Errorf("all: %+v %v", sel, err)
	}
	for _, bad := range [][]string{{"gpu0"}, {"-1"}, {"all", "1"}, {"0000:3b:00"}} {
		if _, err := parsePassthrough(bad); err == nil || !strings.Contains(err.Error(), "--passthrough-gpus") {
			t.Errorf("%v: %v, want an error naming the flag", bad, err)
		}
	}
}

// The flag reaches the published slices: --print-slices shows the vfio
// device of each chosen GPU and nothing for the others.
func TestPrintSlicesPassthrough(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--simulate", "h100x2", "--node-name", "n1", "--passthrough-gpus", "1", "--print-slices"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "name: gpu-1-vfio") || strings.Contains(out.String(), "gpu-0-vfio") {
		t.Fatalf("want gpu-1-vfio only:\n%s", out.String())
	}
}
