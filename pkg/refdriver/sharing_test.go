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

// TestReadCheckpointSharing reads what NVIDIA's plugin records for MPS,
// time-slicing and passthrough (testdata/README.md): each group's whole
// GPUs, its MPS daemon and whether a time slice was applied, and a VFIO
// device's PCI address where the checkpoint has one.
func TestReadCheckpointSharing(t *testing.T) {
	cp, err := ReadCheckpoint(copyFixture(t, "checkpoint-sharing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Claims) != 4 {
		t.Fatalf("%d claims, want 4", len(cp.Claims))
	}
	mps, ts, vfio, vfioOld := cp.Claims[0], cp.Claims[1], cp.Claims[2], cp.Claims[3]
	if want := []Group{{GPUs: []string{"GPU-00000000-0000-0000-0000-000000000000"}, MPSDaemon: "5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0b01-e74c8"}}; !reflect.DeepEqual(mps.Groups, want) {
		t.Errorf("MPS claim's groups %+v, want %+v", mps.Groups, want)
	}
	if want := []Group{{GPUs: []string{"GPU-00000000-0000-0000-0000-000000000001"}, TimeSliceApplied: true}}; !reflect.DeepEqual(ts.Groups, want) {
		t.Errorf("time-sliced claim's groups %+v, want %+v", ts.Groups, want)
	}
	if d := vfio.Devices; len(d) != 1 || !d[0].Vfio || d[0].PCIBusID != "0000:3b:00.0" || d[0].GPU != VfioUUID("0000:3b:00.0") || d[0].Name != "gpu-vfio-2" {
		t.Errorf("VFIO claim's devices %+v", d)
	}
	if g := vfio.Groups; len(g) != 1 || len(g[0].GPUs) != 0 {
		t.Errorf("a VFIO device is no whole GPU of its group: %+v", g)
	}
	if d := vfioOld.Devices; len(d) != 1 || !d[0].Vfio || d[0].PCIBusID != "" || d[0].GPU != VfioUUID("0000:5e:00.0") {
		t.Errorf("VFIO claim of a release without pciBusID: %+v", d)
	}
}

// TestVfioUUID: NVIDIA's name-based UUID of a PCI address (uuid.NewSHA1
// with uuid.NameSpaceDNS), the values Python's uuid.uuid5 gives too.
func TestVfioUUID(t *testing.T) {
	for addr, want := range map[string]string{
		"0000:3b:00.0": "5f36833e-54b9-5234-b457-89cdb0ccb109",
		"0000:00:03.0": "48313dec-cc65-5ed0-81d5-228566cb72f6",
	} {
		if got := VfioUUID(addr); got != want {
			t.Errorf("VfioUUID(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestReadCheckpointShares reads NVIDIA's ConsumableShares claims: two
// share a MIG device, two a whole GPU, each with the share the scheduler
// gave it.
func TestReadCheckpointShares(t *testing.T) {
	cp, err := ReadCheckpoint(copyFixture(t, "checkpoint-shares.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cp.Claims {
		for _, d := range c.Devices {
			got = append(got, d.Name+" "+d.ShareID)
		}
	}
	want := []string{
		"gpu-0-mig-1g10gb-19-0 7d4e2f10-3a5b-4c6d-8e9f-0a1b2c3d4e01",
		"gpu-0-mig-1g10gb-19-0 7d4e2f10-3a5b-4c6d-8e9f-0a1b2c3d4e02",
		"gpu-1 7d4e2f10-3a5b-4c6d-8e9f-0a1b2c3d4e03",
		"gpu-1 7d4e2f10-3a5b-4c6d-8e9f-0a1b2c3d4e04",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shared devices %v, want %v", got, want)
	}
	if cp.Claims[0].Mig[0] != cp.Claims[1].Mig[0] {
		t.Errorf("the two MIG shares name different devices: %+v, %+v", cp.Claims[0].Mig, cp.Claims[1].Mig)
	}
}

// TestReadCheckpointDanglingLink: a checkpoint.json that is a symbolic
// link to nothing is an error, like any file that cannot be read. On main
// it was taken for no checkpoint at all: every GPU published free while
// what it pointed at may list claims in use.
func TestReadCheckpointDanglingLink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "gone.json"), filepath.Join(dir, CheckpointFile)); err != nil {
		t.Fatal(err)
	}
	cp, err := ReadCheckpoint(dir)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "gone.json") {
		t.Fatalf("dangling link: %+v, %v; want an error naming the link and its target", cp, err)
	}
}
