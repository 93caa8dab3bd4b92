// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"strings"
	"testing"
)

func TestValidToken(t *testing.T) {
	for s, want := range map[string]bool{
		"GPU-4f2a1b3c-0000-1111-2222-333344445555": true,
		"MIG-x":                  true,
		"a":                      true,
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
		"":                       false,
		".":                      false,
		"..":                     false,
		"-leading-dash":          false,
		".hidden":                false,
		"a/b":                    false,
		"a b":                    false,
		"a\x00b":                 false,
	} {
		if got := ValidToken(s); got != want {
			t.Errorf("ValidToken(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestValidateFollowsPrepare: what a started prepare records (a dynamic MIG
// device not created yet, its MPS target unknown) is valid; the same record
// marked completed is not.
func TestValidateFollowsPrepare(t *testing.T) {
	started := PreparedClaim{UID: "u1", State: PrepareStarted, Devices: []PreparedDevice{{
		Pool: "n1", Device: "mig-0-1", Type: "mig",
		Mig:     &MigRecord{ParentUUID: "GPU-0", Dynamic: true, GIID: -1, CIID: -1},
		Sharing: &SharingRecord{Strategy: "MPS"},
	}}}
	if err := started.Validate(); err != nil {
		t.Fatalf("started record: %v", err)
	}
	completed := started.DeepCopy()
	completed.State = PrepareCompleted
	err := completed.Validate()
	if err == nil || !strings.Contains(err.Error(), "devices[0]") {
		t.Fatalf("completed record without UUID: %v, want an error naming devices[0]", err)
	}
	completed.Devices[0].UUID = "MIG-1"
	completed.Devices[0].Sharing.Target = "MIG-1"
	if err := completed.Validate(); err == nil || !strings.Contains(err.Error(), "GPU and compute instance IDs") {
		t.Fatalf("completed dynamic MIG record without instance IDs: %v", err)
	}
	completed.Devices[0].Mig.GIID, completed.Devices[0].Mig.CIID = 3, 0
	if err := completed.Validate(); err != nil {
		t.Fatalf("completed record: %v", err)
	}
	long := completed.DeepCopy()
	long.Name = strings.Repeat("n", 254)
	if err := long.Validate(); err == nil {
		t.Fatal("a 254-character name was accepted")
	}
	unknown := completed.DeepCopy()
	unknown.Devices[0].Sharing.Strategy = "Spatial"
	if err := unknown.Validate(); err == nil || !strings.Contains(err.Error(), `"Spatial" is unknown`) {
		t.Fatalf("unknown strategy: %v", err)
	}
	negative := completed.DeepCopy()
	negative.Devices[0].Sharing.PinnedMemoryBytes = -1
	if err := negative.Validate(); err == nil {
		t.Fatal("a negative memory limit was accepted")
	}
}

func TestDeepCopyOfEmptyRecord(t *testing.T) {
	c := PreparedClaim{UID: "u1", State: PrepareStarted}
	if cp := c.DeepCopy(); cp.Devices != nil {
		t.Fatalf("copy of a record without devices has %v", cp.Devices)
	}
}
