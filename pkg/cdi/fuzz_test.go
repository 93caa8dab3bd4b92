// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzClaimSpec feeds arbitrary bytes as a claim's CDI spec. Listing must
// not fail or panic, and a record is only ever handed out when its
// checksum matches, it validates, and it names the spec's own claim.
func FuzzClaimSpec(f *testing.F) {
	record := `{"uid":"u1","namespace":"ns","name":"c","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-0","type":"gpu","uuid":"GPU-1"}]}`
	for _, sum := range []string{checksum([]byte(record)), "00000000"} {
		spec, _ := json.Marshal(map[string]any{"cdiVersion": "0.5.0", "kind": "k8s.gpu.nvidia.com/claim",
			"annotations": map[string]string{ClaimAnnotation: record, ChecksumAnnotation: sum},
			"devices":     []any{map[string]any{"name": "u1-gpu-0", "containerEdits": map[string]any{"env": []string{"A=1"}}}}})
		f.Add(spec)
	}
	f.Add([]byte(`{"kind":"k8s.gpu.nvidia.com/claim","annotations":{"gpu.nvidia.com/prepared-claim":"{}"}}`))
	f.Add([]byte("\x00"))
	// One writer per fuzzing process.
	dir := f.TempDir()
	w, err := NewWriter(dir, "gpu.nvidia.com", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, w.specName("u1")), data, 0o644); err != nil {
			t.Fatal(err)
		}
		specs, err := w.List()
		if err != nil || len(specs) != 1 {
			t.Fatalf("List: %v, %d specs", err, len(specs))
		}
		rec, ok := specs[0].Claim()
		if ok {
			if rec.UID != "u1" {
				t.Fatalf("record of claim %q in the spec of u1", rec.UID)
			}
			if err := rec.Validate(); err != nil {
				t.Fatalf("handed out an invalid record: %v", err)
			}
		}
		if w.Intact("u1") && !ok {
			t.Fatal("a spec without a usable record counts as intact")
		}
		if err := w.Remove("u1"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	})
}
