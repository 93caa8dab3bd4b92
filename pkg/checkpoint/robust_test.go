// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sharedRecord() PreparedClaim {
	return PreparedClaim{UID: "u1", Namespace: "ns", Name: "c", State: PrepareStarted,
		Devices: []PreparedDevice{{Pool: "n1", Device: "gpu-0", Type: "gpu", UUID: "GPU-1", Requests: []string{"r"},
			Mig:     &MigRecord{ParentUUID: "GPU-1", GIID: -1, CIID: -1, Dynamic: true},
			Sharing: &SharingRecord{Strategy: "MPS", Target: "GPU-1"}}}}
}

// TestRecordsDoNotAlias: what Put stored and what Get returned must not
// change when a caller keeps changing its own copy (prepare does, while
// other goroutines read the store).
func TestRecordsDoNotAlias(t *testing.T) {
	s, _, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := sharedRecord()
	if err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	rec.Devices[0].UUID = "changed"
	rec.Devices[0].Sharing.Target = "changed"
	rec.Devices[0].Mig.GIID = 7
	rec.Devices[0].Requests[0] = "changed"
	got, _ := s.Get("u1")
	if d := got.Devices[0]; d.UUID != "GPU-1" || d.Sharing.Target != "GPU-1" || d.Mig.GIID != -1 || d.Requests[0] != "r" {
		t.Fatalf("store changed with the caller's copy: %+v %+v %+v", d, d.Sharing, d.Mig)
	}
	got.Devices[0].Sharing.Target = "changed-too"
	if again, _ := s.Get("u1"); again.Devices[0].Sharing.Target != "GPU-1" {
		t.Fatal("a Get result aliases the store")
	}
	for _, l := range s.List() {
		l.Devices[0].Mig.GIID = 9
	}
	if again, _ := s.Get("u1"); again.Devices[0].Mig.GIID != -1 {
		t.Fatal("a List result aliases the store")
	}
}

func writeRaw(t testing.TB, dir, name string, claim any) {
	t.Helper()
	payload, _ := json.Marshal(claim)
	data, _ := json.Marshal(file{Version: Version, Checksum: crc32.ChecksumIEEE(payload), Claim: payload})
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidRecordsAreMovedAside: CRC-valid records that no prepare could
// have written are damage, never acted on.
func TestInvalidRecordsAreMovedAside(t *testing.T) {
	bad := map[string]func(c *PreparedClaim){
		"empty uid":        func(c *PreparedClaim) { c.UID = "" },
		"uid with slash":   func(c *PreparedClaim) { c.UID = "a/b" },
		"device twice":     func(c *PreparedClaim) { c.Devices = append(c.Devices, c.Devices[0]) },
		"target escapes":   func(c *PreparedClaim) { c.Devices[0].Sharing.Target = "../../victim" },
		"completed no mig": func(c *PreparedClaim) { c.State = PrepareCompleted; c.Devices[0].UUID = "" },
		"unknown state":    func(c *PreparedClaim) { c.State = "Halfway" },
		"bad device name":  func(c *PreparedClaim) { c.Devices[0].Device = "../gpu" },
		"percent":          func(c *PreparedClaim) { c.Devices[0].Sharing.ActiveThreadPercentage = 150 },
	}
	for name, damage := range bad {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := sharedRecord()
			damage(&c)
			writeRaw(t, dir, strings.ReplaceAll(string(c.UID), "/", "")+".json", c)
			s, rec, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.MovedAside) != 1 || len(s.List()) != 0 {
				t.Fatalf("moved aside %v, loaded %d", rec.MovedAside, len(s.List()))
			}
		})
	}
	t.Run("oversized", func(t *testing.T) {
		dir := t.TempDir()
		c := sharedRecord()
		c.Name = strings.Repeat("x", MaxFileSize)
		writeRaw(t, dir, "u1.json", c)
		if _, rec, _ := Open(dir); len(rec.MovedAside) != 1 {
			t.Fatalf("oversized record not moved aside: %v", rec.MovedAside)
		}
	})
	t.Run("put refuses", func(t *testing.T) {
		s, _, _ := Open(t.TempDir())
		c := sharedRecord()
		c.Devices[0].Sharing.Target = ""
		c.State = PrepareCompleted
		if err := s.Put(c); err == nil {
			t.Fatal("Put accepted a completed record without a sharing target")
		}
	})
}

func TestFenceSupersedesOlderInstance(t *testing.T) {
	dir := t.TempDir()
	old, _ := NewFence(dir, "old")
	release, err := old.TakeOver()
	if err != nil {
		t.Fatal(err)
	}
	release()
	leave, err := old.Enter()
	if err != nil {
		t.Fatal(err)
	}
	// A newer instance waits for the call in flight.
	newer, _ := NewFence(dir, "new")
	took := make(chan func())
	go func() {
		r, err := newer.TakeOver()
		if err != nil {
			t.Error(err)
		}
		took <- r
	}()
	time.Sleep(100 * time.Millisecond) // let it try
	select {
	case <-took:
		t.Fatal("take-over did not wait for the older instance's call in flight")
	default:
	}
	leave()
	select {
	case release := <-took:
		release()
	case <-time.After(10 * time.Second):
		t.Fatal("take-over still waits after the older instance's call ended")
	}
	if _, err := old.Enter(); err != ErrSuperseded {
		t.Fatalf("older instance after take-over: %v", err)
	}
	if leave, err := newer.Enter(); err != nil {
		t.Fatal(err)
	} else {
		leave()
	}
}
