// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package gpusmoke

import "testing"

// Both smoke steps that prepare a GPU take the same flags from
// smokeOptions.addFlags; only --timeout's default and --simulate's help
// differ, and --simulate stays hidden in both.
func TestSmokeFlagsShared(t *testing.T) {
	prepare, container := newSmokePrepareCommand().Flags(), newSmokeContainerCommand().Flags()
	for _, name := range []string{"driver-root", "nvml-library", "hook", "gpu", "timeout", "simulate"} {
		p, c := prepare.Lookup(name), container.Lookup(name)
		if p == nil || c == nil {
			t.Fatalf("--%s: prepare has it %v, container has it %v; want both", name, p != nil, c != nil)
		}
		if name != "timeout" && p.DefValue != c.DefValue {
			t.Errorf("--%s default: prepare %q, container %q; want the same", name, p.DefValue, c.DefValue)
		}
		if name != "simulate" && p.Usage != c.Usage {
			t.Errorf("--%s help: prepare %q, container %q; want the same", name, p.Usage, c.Usage)
		}
		if p.Hidden != (name == "simulate") || c.Hidden != p.Hidden {
			t.Errorf("--%s hidden: prepare %v, container %v; want only --simulate hidden", name, p.Hidden, c.Hidden)
		}
	}
	if p, c := prepare.Lookup("timeout").DefValue, container.Lookup("timeout").DefValue; p != "2m0s" || c != "3m0s" {
		t.Errorf("--timeout default: prepare %s, container %s; want 2m0s and 3m0s", p, c)
	}
	for _, name := range []string{"runc", "rootfs"} {
		if prepare.Lookup(name) != nil || container.Lookup(name) == nil {
			t.Errorf("--%s: want it on smoke container only", name)
		}
	}
	if d := prepare.Lookup("driver-root").DefValue; d != "/" {
		t.Errorf("--driver-root default %q, want /", d)
	}
}
