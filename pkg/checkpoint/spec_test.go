// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"reflect"
	"testing"
)

// TestSpecAnnotations: the record a CDI spec carries is the record's JSON
// and its CRC-32 in hex, exactly as specs on nodes hold them, and reads
// back only under its own claim's UID.
func TestSpecAnnotations(t *testing.T) {
	rec := PreparedClaim{UID: "u1", Namespace: "ns", Name: "c", State: PrepareCompleted,
		Devices: []PreparedDevice{{Pool: "n1", Device: "gpu-0", Type: "gpu", UUID: "GPU-1",
			Sharing: &SharingRecord{Strategy: "TimeSlicing", Target: "GPU-1", Interval: "Long"}}}}
	got, err := SpecAnnotations(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"gpu.nvidia.com/prepared-claim":       `{"uid":"u1","namespace":"ns","name":"c","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-0","type":"gpu","uuid":"GPU-1","sharing":{"strategy":"TimeSlicing","target":"GPU-1","interval":"Long"}}]}`,
		"gpu.nvidia.com/prepared-claim-crc32": "04ce5ac2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("annotations\n%v\nwant\n%v", got, want)
	}
	if back, ok := FromSpecAnnotations("u1", got); !ok || !reflect.DeepEqual(back, rec) {
		t.Fatalf("read back %+v, %v", back, ok)
	}
	if _, ok := FromSpecAnnotations("u2", got); ok {
		t.Fatal("a record read back under another claim's UID")
	}
	got[ChecksumAnnotation] = "00000000"
	if _, ok := FromSpecAnnotations("u1", got); ok || SpecCarriesRecord(got) {
		t.Fatal("a record with a wrong checksum was trusted")
	}
}

// FuzzSpecAnnotations feeds arbitrary annotation values. A record is only
// ever handed out when its checksum matches, it validates, and it names
// the spec's own claim.
func FuzzSpecAnnotations(f *testing.F) {
	record := `{"uid":"u1","namespace":"ns","name":"c","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-0","type":"gpu","uuid":"GPU-1"}]}`
	f.Add(record, specChecksum([]byte(record)))
	f.Add(record, "00000000")
	f.Add("{}", specChecksum([]byte("{}")))
	f.Add("", "")
	f.Fuzz(func(t *testing.T, record, sum string) {
		annotations := map[string]string{ClaimAnnotation: record, ChecksumAnnotation: sum}
		rec, ok := FromSpecAnnotations("u1", annotations)
		if ok {
			if rec.UID != "u1" {
				t.Fatalf("record of claim %q in the spec of u1", rec.UID)
			}
			if err := rec.Validate(); err != nil {
				t.Fatalf("handed out an invalid record: %v", err)
			}
			if sum != specChecksum([]byte(record)) || !SpecCarriesRecord(annotations) {
				t.Fatal("handed out a record whose checksum does not match")
			}
		}
	})
}
