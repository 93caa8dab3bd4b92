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

// The fixtures in testdata are what NVIDIA's plugin writes, read from
// its source at a named commit: see testdata/README.md.

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

// TestReadCheckpointV2 reads v1 and v2 side by side. The prepared claims
// have no name (NVIDIA's plugin records none for them): they are named by
// UID. Before issue 51 they were taken for unnamed v1 claims only in a v1
// file; reading devices and MPS daemons is new.
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
	// v2 is read, not v1: ref-c (PrepareStarted) is only in v2.
	want := []string{
		"uid 5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01 PrepareCompleted",
		"uid 5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a02 PrepareCompleted",
		"default/ref-c PrepareStarted",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("claims %v, want %v", got, want)
	}
	a := cp.Claims[0]
	if len(a.Mig) != 1 || a.Mig[0].GIID != 9 || a.Mig[0].ParentUUID != "GPU-00000000-0000-0000-0000-000000000000" || !strings.HasPrefix(a.Mig[0].UUID, "MIG-") {
		t.Errorf("claim a's MIG devices: %+v", a.Mig)
	}
	if len(a.Devices) != 1 || a.Devices[0].Name != "gpu-0-mig-1g10gb-19-0" || a.Devices[0].Mig == nil || a.Devices[0].GPU != a.Mig[0].ParentUUID ||
		!reflect.DeepEqual(a.Devices[0].CDIDeviceIDs, []string{"k8s.gpu.nvidia.com/claim=5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0a01-gpu-0-mig-1g10gb-19-0"}) {
		t.Errorf("claim a's devices: %+v", a.Devices)
	}
	if a.Allocation == nil || a.Allocation.Devices.Results[0].Device != "gpu-0-mig-1g10gb-19-0" {
		t.Errorf("claim a's allocation: %+v", a.Allocation)
	}
	b := cp.Claims[1]
	if len(b.Mig) != 0 || len(b.Devices) != 1 || b.Devices[0].GPU != "GPU-00000000-0000-0000-0000-000000000001" || b.Devices[0].Name != "gpu-1" || b.Devices[0].Pool != "n1" {
		t.Errorf("a whole GPU's claim: %+v", b)
	}
	if c := cp.Claims[2]; c.Completed() || len(c.Devices) != 0 {
		t.Errorf("a begun prepare: %+v", c)
	}
}

// TestReadMPSDaemon: the MPS daemon ID of a group's configState is read,
// and names the reference driver's Deployment and directory.
func TestReadMPSDaemon(t *testing.T) {
	dir := t.TempDir()
	data := `{"checksum":1,"v2":{"checksum":2,"nodeBootID":"b","preparedClaims":{"u1":{"checkpointState":"PrepareCompleted","status":{},"preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["r"],"PoolName":"n1","DeviceName":"gpu-0","CDIDeviceIDs":null}},"mig":null}],"configState":{"mpsControlDaemonID":"u1-3f2a1"}}]}}}}`
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Claims) != 1 || !reflect.DeepEqual(cp.Claims[0].MPSDaemons, []string{"u1-3f2a1"}) {
		t.Fatalf("claims %+v", cp.Claims)
	}
	if MPSDeployment("u1-3f2a1") != "mps-control-daemon-u1-3f2a1" || MPSDir("/p", "u1-3f2a1") != "/p/mps/u1-3f2a1" {
		t.Errorf("MPS names %q %q", MPSDeployment("u1-3f2a1"), MPSDir("/p", "u1-3f2a1"))
	}
}

// TestReleased: the released list survives a restart, and Finish renames
// the checkpoint and removes it.
func TestReleased(t *testing.T) {
	dir := copyFixture(t, "checkpoint.json")
	if got, err := Released(dir); err != nil || len(got) != 0 {
		t.Fatalf("none released: %v, %v", got, err)
	}
	if err := WriteReleased(dir, map[string]bool{"a": true, "b": true}); err != nil {
		t.Fatal(err)
	}
	if got, err := Released(dir); err != nil || !reflect.DeepEqual(got, map[string]bool{"a": true, "b": true}) {
		t.Fatalf("released %v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReleasedFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Released(dir); err == nil || !strings.Contains(err.Error(), ReleasedFile) || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("damaged list: %v, want an error naming the file and the fix", err)
	}
	cp, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Finish(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{CheckpointFile: false, ReleasedFile: false, CheckpointFile + MigratedSuffix: true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
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
