// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPutGetReopen(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := PreparedClaim{UID: "u1", Namespace: "ns", Name: "c", State: PrepareCompleted,
		Devices: []PreparedDevice{{Pool: "n1", Device: "gpu-0", Type: "gpu", UUID: "GPU-1", CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/claim=u1-gpu-0"}}}}
	if err := s.Put(c); err != nil {
		t.Fatal(err)
	}
	s2, rec, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.MovedAside) != 0 {
		t.Fatalf("nothing should be moved aside, got %v", rec.MovedAside)
	}
	got, ok := s2.Get("u1")
	if !ok || got.State != PrepareCompleted || got.Devices[0].UUID != "GPU-1" {
		t.Fatalf("reopened record = %+v, %v", got, ok)
	}
	if err := s2.Delete("u1"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Delete("u1"); err != nil {
		t.Fatalf("second delete must be a no-op: %v", err)
	}
	if len(s2.List()) != 0 {
		t.Fatal("record still listed after delete")
	}
}

func TestCorruptFilesAreMovedAside(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := Open(dir)
	if err := s.Put(PreparedClaim{UID: "good", State: PrepareCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(PreparedClaim{UID: "flipped", State: PrepareCompleted, Name: "abc"}); err != nil {
		t.Fatal(err)
	}
	// Truncated JSON, a bit flip that still parses, a foreign version, a stray temp file.
	os.WriteFile(filepath.Join(dir, "trunc.json"), []byte(`{"version":"gpu.nvidia.com/checkpoint/v1","claim":{"uid":"tr`), 0o600)
	data, _ := os.ReadFile(filepath.Join(dir, "flipped.json"))
	os.WriteFile(filepath.Join(dir, "flipped.json"), []byte(string(data[:len(data)-8])+`"abd"}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "old.json"), []byte(`{"version":"v0","claim":{"uid":"old"}}`), 0o600)
	os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte(`partial`), 0o600)

	s2, rec, err := Open(dir)
	if err != nil {
		t.Fatalf("open must recover, got %v", err)
	}
	if len(rec.MovedAside) != 3 {
		t.Fatalf("want 3 files moved aside, got %v", rec.MovedAside)
	}
	if _, ok := s2.Get("good"); !ok {
		t.Fatal("intact record lost")
	}
	if _, ok := s2.Get("flipped"); ok {
		t.Fatal("record with bad checksum was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-123")); !os.IsNotExist(err) {
		t.Fatal("stale temp file not removed")
	}
	// A second open finds nothing more to move.
	if _, rec, _ := Open(dir); len(rec.MovedAside) != 0 {
		t.Fatalf("second open moved %v", rec.MovedAside)
	}
}
