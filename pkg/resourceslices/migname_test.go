// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices

import "testing"

// TestParseMigDeviceName reads back what MigDeviceName writes, and refuses
// the names of the other device kinds, which `gpudra usage` meets in the
// same slices.
func TestParseMigDeviceName(t *testing.T) {
	for _, c := range []struct {
		minor   int
		profile string
		start   uint32
		clean   string
	}{{0, "1g.10gb", 3, "1g10gb"}, {12, "1g.10gb+me", 0, "1g10gbme"}, {7, "7g.80gb", 0, "7g80gb"}} {
		name := MigDeviceName(c.minor, c.profile, c.start)
		m, p, s, ok := ParseMigDeviceName(name)
		if !ok || m != c.minor || p != c.clean || s != c.start {
			t.Errorf("ParseMigDeviceName(%q) = %d %q %d %v, want %d %q %d", name, m, p, s, ok, c.minor, c.clean, c.start)
		}
	}
	for _, name := range []string{"gpu-3", "gpu-3-monitor", "gpu-x-mig-1g10gb-0", "gpu-1-mig-1g10gb-", "gpu-1-mig--2", "nic-0"} {
		if _, _, _, ok := ParseMigDeviceName(name); ok {
			t.Errorf("ParseMigDeviceName(%q) accepted a name that is not a MIG device's", name)
		}
	}
}
