// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package refdriver

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The fixtures in testdata are written by hand in the reference driver's
// format as its MarshalCheckpoint writes it (cmd/gpu-kubelet-plugin/
// checkpoint.go, checkpointv.go, prepared.go, mig.go at commit 2240711):
// checkpoint.json both versions, as current releases write (v1 holds only
// the claims in PrepareCompleted), checkpoint-v1.json v1 alone, as
// releases before v2 wrote. The checksums are not valid: nothing here
// verifies them (a listed claim counts even in a file the reference
// driver would call corrupt).

// copyFixture puts a testdata file into a new plugin dir as checkpoint.json.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReadCheckpointV2(t *testing.T) {
	cp, err := ReadCheckpoint(copyFixture(t, "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cp.NodeBootID != "6a1f0f3e-2b9c-4d0e-8e57-3c1b2a9d8f10" {
		t.Errorf("boot ID %q", cp.NodeBootID)
	}
	var got []string
	for _, c := range cp.Claims {
		got = append(got, c.String()+" "+c.State)
	}
	// v2 is read, not v1: ref-c (PrepareStarted) is only in v2, and its
	// begun prepare may have made a MIG device already.
	want := []string{"default/ref-a PrepareCompleted", "default/ref-b PrepareCompleted", "default/ref-c PrepareStarted"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	a := cp.Claims[0]
	if a.UID != "5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01" || len(a.Mig) != 1 || a.Mig[0].GIID != 9 || a.Mig[0].ParentUUID != "GPU-00000000-0000-0000-0000-000000000000" || !strings.HasPrefix(a.Mig[0].UUID, "MIG-") {
		t.Errorf("claim ref-a: %+v", a)
	}
	if a.Allocation == nil || a.Allocation.Devices.Results[0].Device != "gpu-0-mig-1g10gb-19-0" {
		t.Errorf("ref-a's allocation: %+v", a.Allocation)
	}
	if len(cp.Claims[1].Mig) != 0 {
		t.Errorf("a whole GPU's claim lists MIG devices: %+v", cp.Claims[1].Mig)
	}
}

func TestReadCheckpointV1(t *testing.T) {
	cp, err := ReadCheckpoint(copyFixture(t, "checkpoint-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Claims) != 1 || cp.Claims[0].Name != "" || cp.Claims[0].State != "PrepareCompleted" || cp.NodeBootID != "" {
		t.Fatalf("v1 claims %+v, boot %q", cp.Claims, cp.NodeBootID)
	}
	if s := cp.Claims[0].String(); s != "uid 7c2d9e40-8a1b-4c3d-9e5f-0a1b2c3d4e01" {
		t.Errorf("a v1 claim is named %q", s)
	}
}

func TestReadCheckpointMissingAndEmpty(t *testing.T) {
	dir := t.TempDir()
	if cp, err := ReadCheckpoint(dir); cp != nil || err != nil {
		t.Fatalf("no file: %+v, %v", cp, err)
	}
	// What the reference driver writes at its first start (NewDeviceState:
	// "Create empty checkpoint") and after its last unprepare.
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(`{"checksum":1,"v1":{},"v2":{"checksum":2,"nodeBootID":"b"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := ReadCheckpoint(dir)
	if err != nil || len(cp.Claims) != 0 {
		t.Fatalf("empty checkpoint: %+v, %v", cp, err)
	}
	if err := cp.Rename(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointFile+MigratedSuffix)); err != nil {
		t.Fatal(err)
	}
	if cp, err := ReadCheckpoint(dir); cp != nil || err != nil {
		t.Fatalf("after rename: %+v, %v", cp, err)
	}
}

func TestReadCheckpointNotTheFormat(t *testing.T) {
	for name, content := range map[string]string{"garbage": "{not json", "other": `{"claims":{}}`} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "reference driver's checkpoint format") {
			t.Errorf("%s: %v, want an error naming the format", name, err)
		}
	}
}

func TestSpecFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"k8s.gpu.nvidia.com-claim_5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01.yaml", // the reference driver's
		"k8s.gpu.nvidia.com-claim_5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01.json", // this driver's
		"gpu.nvidia.com_metadata_5e0b7c1a_gpu.json",                          // the kubelet helper's
		"nvidia.yaml", // nvidia-ctk cdi generate's
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := SpecFiles(dir, "gpu.nvidia.com")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || filepath.Base(got[0]) != "k8s.gpu.nvidia.com-claim_5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01.yaml" {
		t.Fatalf("spec files %v", got)
	}
}
