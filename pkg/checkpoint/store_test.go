// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// fullRecord sets every field, so a round trip that drops one shows.
func fullRecord(uid string, state ClaimState) PreparedClaim {
	return PreparedClaim{UID: types.UID(uid), Namespace: "ns", Name: "claim-" + uid, State: state, BootID: "21d6511a-6f19-428e-8a1b-0808e6cce955", Devices: []PreparedDevice{
		{Requests: []string{"a", "b/c"}, Pool: "n1", Device: "gpu-0", Type: "gpu", UUID: "GPU-0", ProductName: "NVIDIA H100 80GB HBM3",
			CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/claim=" + uid + "-gpu-0"}, Shared: true, ShareID: "share-1",
			Sharing: &SharingRecord{Strategy: "MPS", Target: "GPU-0", ActiveThreadPercentage: 40, PinnedMemoryBytes: 10 << 30}},
		{Pool: "n1", Device: "mig-1-0", Type: "mig", UUID: "MIG-1", AdminAccess: true,
			Mig: &MigRecord{ParentUUID: "GPU-1", Profile: "1g.10gb", Start: 3, Size: 1, Dynamic: true, GIID: 9, CIID: 0}},
	}}
}

func reopen(t *testing.T, dir string) (*Store, Recovered) {
	t.Helper()
	s, rec, err := Open(dir)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s, rec
}

// TestRoundTripsSurviveReopen: every field, overwrites and deletes are on
// disk, not only in memory.
func TestRoundTripsSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s, _ := reopen(t, dir)
	started := fullRecord("u1", PrepareStarted)
	started.Devices[1].UUID, started.Devices[1].Mig.GIID, started.Devices[1].Mig.CIID = "", -1, -1
	for _, c := range []PreparedClaim{started, fullRecord("u2", PrepareCompleted), fullRecord("u3", PrepareCompleted)} {
		if err := s.Put(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(fullRecord("u1", PrepareCompleted)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("u3"); err != nil {
		t.Fatal(err)
	}
	s2, rec := reopen(t, dir)
	if len(rec.MovedAside) != 0 {
		t.Fatalf("moved aside %v", rec.MovedAside)
	}
	if got := len(s2.List()); got != 2 {
		t.Fatalf("%d records after reopen, want 2", got)
	}
	for _, uid := range []string{"u1", "u2"} {
		got, ok := s2.Get(types.UID(uid))
		if want := fullRecord(uid, PrepareCompleted); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s after reopen:\n got %+v\nwant %+v", uid, got, want)
		}
	}
	if _, ok := s2.Get("u3"); ok {
		t.Error("deleted record came back after reopen")
	}
}

// writeVersioned writes a record under a version with a correct checksum,
// so that only the version can make Open refuse it.
func writeVersioned(t *testing.T, dir, version string, c PreparedClaim) {
	t.Helper()
	payload, _ := json.Marshal(c)
	data, _ := json.Marshal(file{Version: version, Checksum: crc32.ChecksumIEEE(payload), Claim: payload})
	if err := os.WriteFile(filepath.Join(dir, string(c.UID)+".json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestVersionField: files carry Version; an unknown version (or none) is
// moved aside even with a correct checksum, the current one is loaded.
func TestVersionField(t *testing.T) {
	dir := t.TempDir()
	s, _ := reopen(t, dir)
	if err := s.Put(fullRecord("u1", PrepareCompleted)); err != nil {
		t.Fatal(err)
	}
	var f file
	data, _ := os.ReadFile(filepath.Join(dir, "u1.json"))
	if err := json.Unmarshal(data, &f); err != nil || f.Version != versionPrefix+"1" || f.Checksum != crc32.ChecksumIEEE(f.Claim) {
		t.Fatalf("written file: version %q checksum %d (%v)", f.Version, f.Checksum, err)
	}
	writeVersioned(t, dir, "gpu.nvidia.com/checkpoint/v0", fullRecord("u2", PrepareCompleted))
	writeVersioned(t, dir, "", fullRecord("u3", PrepareCompleted))
	writeVersioned(t, dir, Version, fullRecord("u4", PrepareCompleted))
	s2, rec := reopen(t, dir)
	if len(rec.MovedAside) != 2 {
		t.Fatalf("moved aside %v, want u2 and u3", rec.MovedAside)
	}
	for _, uid := range []string{"u1", "u4"} {
		if _, ok := s2.Get(types.UID(uid)); !ok {
			t.Errorf("%s (current version) not loaded", uid)
		}
	}
}

// TestDamageIsMovedAsideWithItsContent: damaged files are renamed, not
// deleted (an admin may want them), and never stop Open; files that are
// not records are left alone.
func TestDamageIsMovedAsideWithItsContent(t *testing.T) {
	dir := t.TempDir()
	s, _ := reopen(t, dir)
	if err := s.Put(fullRecord("good", PrepareCompleted)); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(filepath.Join(dir, "good.json"))
	damaged := map[string][]byte{
		"empty.json":     nil,
		"garbage.json":   []byte("\x00\xff not json"),
		"truncated.json": good[:len(good)/2],
		// An intact record under another claim's name: never act on it.
		"renamed.json": good,
		"huge.json":    []byte(strings.Repeat(" ", MaxFileSize+1)),
	}
	for name, data := range damaged {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir.json"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("admin notes"), 0o600); err != nil {
		t.Fatal(err)
	}

	s2, rec := reopen(t, dir)
	if len(rec.MovedAside) != len(damaged) {
		t.Fatalf("moved aside %v, want the %d damaged files", rec.MovedAside, len(damaged))
	}
	for _, aside := range rec.MovedAside {
		name, stamp, ok := strings.Cut(filepath.Base(aside), ".corrupt-")
		want, known := damaged[name]
		if !ok || !known || stamp == "" {
			t.Errorf("moved aside as %s", aside)
			continue
		}
		if got, err := os.ReadFile(aside); err != nil || string(got) != string(want) {
			t.Errorf("%s lost its content (%v)", aside, err)
		}
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still in place", name)
		}
	}
	if got := s2.List(); len(got) != 1 || got[0].UID != "good" {
		t.Fatalf("loaded %+v, want only the good record", got)
	}
	for _, keep := range []string{"subdir.json", "notes.txt"} {
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			t.Errorf("%s was touched: %v", keep, err)
		}
	}
	if _, rec := reopen(t, dir); len(rec.MovedAside) != 0 {
		t.Fatalf("a second open moved %v", rec.MovedAside)
	}
}

// TestFifoDoesNotHangOpen: a record path that is a FIFO is damage like any
// other non-regular file; opening it for reading must not wait for a writer.
func TestFifoDoesNotHangOpen(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "u1.json"), 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan Recovered, 1)
	go func() {
		_, rec, err := Open(dir)
		if err != nil {
			t.Error(err)
		}
		done <- rec
	}()
	select {
	case rec := <-done:
		if len(rec.MovedAside) != 1 {
			t.Fatalf("moved aside %v, want the FIFO", rec.MovedAside)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open blocked on a FIFO in the checkpoint directory")
	}
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return matches
}

// TestFailedPutLeavesNoTrace: a write that cannot complete leaves no temp
// file and does not change what Get answers.
func TestFailedPutLeavesNoTrace(t *testing.T) {
	dir := t.TempDir()
	s, _ := reopen(t, dir)
	// The rename fails: a non-empty directory sits where u2's file goes.
	if err := os.MkdirAll(filepath.Join(dir, "u2.json", "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	err := s.Put(fullRecord("u2", PrepareCompleted))
	if err == nil || !strings.Contains(err.Error(), "write checkpoint of claim u2") {
		t.Fatalf("Put over a directory: %v", err)
	}
	if tmp := tempFiles(t, dir); len(tmp) != 0 {
		t.Fatalf("temp files left: %v", tmp)
	}
	if _, ok := s.Get("u2"); ok {
		t.Fatal("a record that was never written is listed")
	}
	// The temp file cannot even be created: the store's copy stays as it was.
	if err := s.Put(fullRecord("u1", PrepareStarted)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(fullRecord("u1", PrepareCompleted)); err == nil {
		t.Fatal("Put into a removed directory succeeded")
	}
	if got, _ := s.Get("u1"); got.State != PrepareStarted {
		t.Fatalf("store says %s after a failed write, disk said %s", got.State, PrepareStarted)
	}
}
