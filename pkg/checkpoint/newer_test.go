// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// newerPayload is a claim as a future driver might write it: a field this
// one does not know, in the claim and in a device.
const newerPayload = `{"uid":"uid-newer","namespace":"ns","name":"c","state":"PrepareCompleted",` +
	`"devices":[{"pool":"n1","device":"gpu-0","type":"gpu","uuid":"GPU-0","partition":{"slices":3}}],` +
	`"bootID":"21d6511a-6f19-428e-8a1b-0808e6cce955","leaseEpoch":7}`

const newerMessage = "claim uid-newer was prepared by a newer driver (checkpoint format gpu.nvidia.com/checkpoint/v4; " +
	"this driver reads up to v3): upgrade the driver again to use or unprepare it"

// TestNewerRecordIsLeftAlone: after a downgrade, a record of a newer format
// is neither loaded, moved aside, rewritten nor deleted, and its claim is
// refused with a message naming both formats.
func TestNewerRecordIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "uid-newer.json")
	want := writeEnvelope(t, dir, "uid-newer.json", vNewer, newerPayload, `,"signature":"future"`)
	unchanged := func(step string) {
		t.Helper()
		got, err := os.ReadFile(path)
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s changed the newer record (%v):\n%s", step, err, got)
		}
		for _, name := range listDir(t, dir) {
			if name != "uid-newer.json" && name != "uid-ok.json" {
				t.Fatalf("%s left %s", step, name)
			}
		}
	}

	s, rec := reopen(t, dir)
	unchanged("Open")
	if !reflect.DeepEqual(rec, Recovered{Newer: map[types.UID]string{"uid-newer": vNewer}}) {
		t.Fatalf("recovered %+v", rec)
	}
	if _, ok := s.Get("uid-newer"); ok || len(s.List()) != 0 {
		t.Fatal("a newer record was loaded")
	}
	if v, ok := s.Newer("uid-newer"); !ok || v != vNewer {
		t.Fatalf("Newer = %q, %v", v, ok)
	}
	if _, ok := s.Newer("uid-other"); ok {
		t.Fatal("Newer reports a claim without a record")
	}
	if err := s.NewerError("uid-other"); err != nil {
		t.Fatalf("NewerError of another claim: %v", err)
	}
	err := s.NewerError("uid-newer")
	var nv *NewerVersionError
	if !errors.As(err, &nv) || nv.UID != "uid-newer" || nv.Version != vNewer || err.Error() != newerMessage {
		t.Fatalf("NewerError = %v", err)
	}

	if err := s.Put(fullRecord("uid-newer", PrepareCompleted)); err == nil || err.Error() != newerMessage {
		t.Fatalf("Put over a newer record: %v", err)
	}
	unchanged("Put")
	if _, ok := s.Get("uid-newer"); ok {
		t.Fatal("a refused Put is listed")
	}
	if err := s.Delete("uid-newer"); !errors.As(err, &nv) {
		t.Fatalf("Delete of a newer record: %v", err)
	}
	unchanged("Delete")
	// Other claims work as usual.
	if err := s.Put(fullRecord("uid-ok", PrepareCompleted)); err != nil {
		t.Fatal(err)
	}
	// A preview sees what the newer claim holds, as far as it reads.
	recs, err := ReadOnly(dir)
	if err != nil || len(recs) != 2 {
		t.Fatalf("ReadOnly: %+v, %v", recs, err)
	}
	for _, r := range recs {
		if r.UID == "uid-newer" && (len(r.Devices) != 1 || r.Devices[0].Device != "gpu-0" || r.Devices[0].UUID != "GPU-0") {
			t.Fatalf("ReadOnly read the newer record as %+v", r)
		}
	}
	if newer := s.NewerClaims(); len(newer) != 1 || !newer[0].Readable || newer[0].Claim.Devices[0].Device != "gpu-0" {
		t.Fatalf("NewerClaims: %+v", newer)
	}
	unchanged("ReadOnly")
	s2, rec := reopen(t, dir)
	unchanged("a second Open")
	if rec.Newer["uid-newer"] != vNewer || len(rec.MovedAside) != 0 || len(s2.List()) != 1 {
		t.Fatalf("second open: %+v, %d loaded", rec, len(s2.List()))
	}
}

// TestNewerRecordEdgeCases: a newer file is judged by its version alone
// (its checksum may follow rules this driver does not know), but its name
// must still be a claim UID.
func TestNewerRecordEdgeCases(t *testing.T) {
	dir := t.TempDir()
	badSum := []byte(`{"version":"gpu.nvidia.com/checkpoint/v4","checksum":"sha256:00","claim":{"uid":"u-sum"}}`)
	if err := os.WriteFile(filepath.Join(dir, "u-sum.json"), badSum, 0o600); err != nil {
		t.Fatal(err)
	}
	writeEnvelope(t, dir, "-dash.json", vNewer, newerPayload, "")
	writeEnvelope(t, dir, ".json", vNewer, newerPayload, "")
	s, rec := reopen(t, dir)
	if v, ok := s.Newer("u-sum"); !ok || v != "gpu.nvidia.com/checkpoint/v4" {
		t.Fatalf("newer record with a foreign checksum: %q %v (%+v)", v, ok, rec)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "u-sum.json")); string(got) != string(badSum) {
		t.Fatal("newer record with a foreign checksum was changed")
	}
	if len(rec.MovedAside) != 2 || len(rec.Newer) != 1 {
		t.Fatalf("files named by no valid UID must be moved aside: %+v", rec)
	}
}
