// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package deviceattr

import "testing"

// TestParseMigDeviceName reads back what DynamicMigDeviceName and
// MigDeviceName write, tells the two forms apart, and refuses the names of
// the other device kinds, which `kubectl gpu usage` meets in the same slices.
func TestParseMigDeviceName(t *testing.T) {
	for _, c := range []struct {
		minor   int
		profile string
		id      int
		start   uint32
		name    string
		clean   string
	}{
		{0, "1g.10gb", 19, 3, "gpu-0-mig-1g10gb-19-3", "1g10gb"},
		{12, "1g.10gb+me", 20, 0, "gpu-12-mig-1g10gbme-20-0", "1g10gbme"},
		{7, "7g.80gb", 0, 0, "gpu-7-mig-7g80gb-0-0", "7g80gb"},
		{1, "1g.24gb-me", 33, 6, "gpu-1-mig-1g24gb-me-33-6", "1g24gb-me"}, // a "-" in a profile name
	} {
		name := DynamicMigDeviceName(c.minor, c.profile, c.id, c.start)
		if name != c.name {
			t.Errorf("DynamicMigDeviceName(%d, %s/%d, %d) = %q, want %q", c.minor, c.profile, c.id, c.start, name, c.name)
		}
		want := MigName{ParentMinor: c.minor, Profile: c.clean, GIProfileID: c.id, Start: c.start}
		if got, ok := ParseMigDeviceName(name); !ok || got != want {
			t.Errorf("ParseMigDeviceName(%q) = %+v %v, want %+v", name, got, ok, want)
		}
		// The name the releases before the profile IDs gave it: a static
		// MIG device's form, which parses without an ID.
		legacy, ok := LegacyMigDeviceName(name)
		if old := MigDeviceName(c.minor, c.profile, c.start); !ok || legacy != old {
			t.Errorf("LegacyMigDeviceName(%q) = %q %v, want %q", name, legacy, ok, old)
		}
		want.GIProfileID = -1
		if got, ok := ParseMigDeviceName(legacy); !ok || got != want {
			t.Errorf("ParseMigDeviceName(%q) = %+v %v, want %+v", legacy, got, ok, want)
		}
		if again, ok := LegacyMigDeviceName(legacy); ok {
			t.Errorf("LegacyMigDeviceName(%q) = %q: a name without a profile ID has no older form", legacy, again)
		}
	}
	for _, name := range []string{"gpu-3", "gpu-3-monitor", "gpu-3-vfio", "gpu-x-mig-1g10gb-0", "gpu--1-mig-1g10gb-0", "gpu-+1-mig-1g10gb-0",
		"gpu-1-mig-1g10gb-", "gpu-1-mig--2", "gpu-1-mig-1g10gb-19--2", "gpu-1-mig-1g10gb-+2", "nic-0"} {
		if n, ok := ParseMigDeviceName(name); ok {
			t.Errorf("ParseMigDeviceName(%q) = %+v: accepted a name that is not a MIG device's", name, n)
		}
	}
}
