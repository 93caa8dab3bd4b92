// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"encoding/json"
	"hash/crc32"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// A record of a newer format (the node was downgraded) still owns the
// devices it names: the claim's pod runs on them, and upgrading back must
// find them as they were. This driver cannot use or unprepare such a
// claim, but it must know what it holds, so that it never hands its
// hardware to another claim, destroys its MIG devices or stops its MPS
// daemon as unowned, or removes its CDI spec.
//
// Every format so far keeps the envelope (version, checksum, claim) and
// the claim's uid, devices[].device, devices[].uuid, devices[].mig and
// devices[].sharing; a newer one is read for those leniently (unknown
// fields ignored). Where that fails the record is opaque: what it owns is
// unknown, and callers must then leave every unowned thing alone.

// NewerClaim is a claim recorded by a newer driver, as far as this one can
// read it.
type NewerClaim struct {
	UID types.UID
	// Version is its file's version string.
	Version string
	// Claim holds what this driver could read of the record; valid only
	// when Readable.
	Claim PreparedClaim
	// Readable is false when the record's devices could not be read.
	Readable bool
}

// NewerClaims lists the claims recorded by a newer driver, sorted by UID.
func (s *Store) NewerClaims() []NewerClaim {
	out := make([]NewerClaim, 0, len(s.newerClaims))
	for _, c := range s.newerClaims {
		c.Claim = c.Claim.DeepCopy()
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b NewerClaim) int { return compareUID(a.UID, b.UID) })
	return out
}

// Owning returns every record that owns hardware on this node: each
// record of this driver, in any state, and each newer driver's record as
// far as it can be read. opaque reports a newer record that could not be
// read: what it owns is unknown. The one source of "who owns what" for
// the device table and for prepare's ownership checks.
func (s *Store) Owning() (records []PreparedClaim, opaque bool) {
	records = s.List()
	for _, n := range s.NewerClaims() {
		if !n.Readable {
			opaque = true
			continue
		}
		records = append(records, n.Claim)
	}
	return records, opaque
}

func compareUID(a, b types.UID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readNewer reads a newer record leniently (see above).
func readNewer(path string, uid types.UID, version string) NewerClaim {
	out := NewerClaim{UID: uid, Version: version}
	data, err := capfile.Read(path, MaxFileSize)
	if err != nil {
		return out
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil || crc32.ChecksumIEEE(f.Claim) != f.Checksum {
		return out
	}
	var c PreparedClaim
	if err := json.Unmarshal(f.Claim, &c); err != nil || c.UID != uid {
		return out
	}
	for _, d := range c.Devices {
		if d.Device == "" {
			return out
		}
	}
	out.Claim, out.Readable = c, true
	return out
}
