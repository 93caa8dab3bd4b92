// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"encoding/json"
	"fmt"
	"hash/crc32"

	"k8s.io/apimachinery/pkg/types"
)

// Each claim's CDI spec carries the claim's record in its annotations, so
// that a lost checkpoint can be rebuilt from the specs on disk (pkg/cdi
// stores the annotations as they are). ClaimAnnotation holds the record's
// JSON; ChecksumAnnotation its CRC-32 (IEEE) in hex: a damaged record is
// never trusted.
const (
	ClaimAnnotation    = "gpu.nvidia.com/prepared-claim"
	ChecksumAnnotation = "gpu.nvidia.com/prepared-claim-crc32"
)

// SpecAnnotations encodes a record for its claim's CDI spec.
func SpecAnnotations(c PreparedClaim) (map[string]string, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return map[string]string{ClaimAnnotation: string(data), ChecksumAnnotation: specChecksum(data)}, nil
}

// SpecCarriesRecord reports whether a spec's annotations carry a record
// whose checksum matches.
func SpecCarriesRecord(annotations map[string]string) bool {
	_, ok := specRecord(annotations)
	return ok
}

// FromSpecAnnotations decodes the record a spec of claim uid carries. It is
// usable only when its checksum matches, it decodes, passes Validate and
// names the spec's own claim.
func FromSpecAnnotations(uid types.UID, annotations map[string]string) (PreparedClaim, bool) {
	data, ok := specRecord(annotations)
	if !ok {
		return PreparedClaim{}, false
	}
	var rec PreparedClaim
	if json.Unmarshal([]byte(data), &rec) != nil || rec.UID != uid || rec.Validate() != nil {
		return PreparedClaim{}, false
	}
	return rec, true
}

// specRecord returns the record's JSON when its checksum matches.
func specRecord(annotations map[string]string) (string, bool) {
	rec, ok := annotations[ClaimAnnotation]
	if !ok || rec == "" || annotations[ChecksumAnnotation] != specChecksum([]byte(rec)) {
		return "", false
	}
	return rec, true
}

func specChecksum(data []byte) string { return fmt.Sprintf("%08x", crc32.ChecksumIEEE(data)) }
