// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds arbitrary bytes as a claim's checkpoint file. Open must
// never fail or panic on it; it either loads a record that passes
// Validate under the file's own name, moves the file aside, or leaves a
// newer format's file exactly as it was.
func FuzzOpen(f *testing.F) {
	good := []byte(`{"version":"gpu.nvidia.com/checkpoint/v1","checksum":0,"claim":{}}`)
	f.Add(good)
	f.Add([]byte(`{"version":"gpu.nvidia.com/checkpoint/v1","claim":{"uid":"u1"`))
	f.Add([]byte("\x00\x01garbage"))
	f.Add([]byte(""))
	f.Add([]byte(`{"version":"gpu.nvidia.com/checkpoint/v4","checksum":0,"claim":{"uid":"u1","future":1}}`))
	f.Add([]byte(`{"version":"gpu.nvidia.com/checkpoint/v1","checksum":3623917751,"claim":{"uid":"u1","state":"PrepareStarted","bootID":"ab"}}`))
	// A valid record, and the same one with a path in its sharing target.
	for _, target := range []string{"GPU-1", "../../victim"} {
		dir := f.TempDir()
		c := sharedRecord()
		c.Devices[0].Sharing.Target = target
		writeRaw(f, dir, "u1.json", c)
		data, _ := os.ReadFile(filepath.Join(dir, "u1.json"))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "u1.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, rec, err := Open(dir)
		if err != nil {
			t.Fatalf("Open failed on a damaged file: %v", err)
		}
		list := s.List()
		if len(list)+len(rec.MovedAside)+len(rec.Newer) != 1 {
			t.Fatalf("file not exactly one of loaded, moved aside, newer: %d loaded, %v, %v", len(list), rec.MovedAside, rec.Newer)
		}
		if len(rec.Newer) == 1 {
			if _, ok := s.Newer("u1"); !ok {
				t.Fatalf("newer record reported as %v", rec.Newer)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "u1.json")); err != nil || string(got) != string(data) {
				t.Fatalf("newer record changed (%v)", err)
			}
		}
		for _, c := range list {
			if c.UID != "u1" {
				t.Fatalf("record loaded under another name: %q", c.UID)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("loaded an invalid record: %v", err)
			}
		}
	})
}
