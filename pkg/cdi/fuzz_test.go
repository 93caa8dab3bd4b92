// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package cdi

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// FuzzClaimSpec feeds arbitrary bytes as a claim's CDI spec. Listing must
// not fail or panic, a spec only counts as this driver's when it parses,
// names its kind and has devices, and its annotations are handed out as
// they are on disk. (What a record in them is worth is pkg/checkpoint's
// FuzzSpecAnnotations.)
func FuzzClaimSpec(f *testing.F) {
	record := `{"uid":"u1","namespace":"ns","name":"c","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-0","type":"gpu","uuid":"GPU-1"}]}`
	for _, sum := range []string{"92fa50c7", "00000000"} {
		spec, _ := json.Marshal(map[string]any{"cdiVersion": "0.5.0", "kind": "k8s.gpu.nvidia.com/claim",
			"annotations": map[string]string{"gpu.nvidia.com/prepared-claim": record, "gpu.nvidia.com/prepared-claim-crc32": sum},
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
		if err != nil || len(specs) != 1 || specs[0].UID != "u1" {
			t.Fatalf("List: %v, %+v", err, specs)
		}
		if annotations, ok := w.Annotations("u1"); ok {
			var spec struct {
				Kind    string
				Devices []any
			}
			if json.Unmarshal(data, &spec) != nil || spec.Kind != "k8s.gpu.nvidia.com/claim" || len(spec.Devices) == 0 {
				t.Fatal("a spec that is not this driver's, or has no devices, counts as intact")
			}
			if !maps.Equal(annotations, specs[0].Annotations) {
				t.Fatalf("Annotations %v, List %v", annotations, specs[0].Annotations)
			}
		}
		if err := w.Remove("u1"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	})
}
