// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Format history. Raise FormatVersion (and Version) with every change to
// what a record holds or how it is checked that a reader of the older
// format would misread, keep decoding every older format in decodeClaim,
// and add a directory of records written by the old code under
// testdata/formats.
//
//	v1: every commit up to 1b7ce73; fields were added without a new
//	    number (mig, sharing, adminAccess, shareID), see testdata/formats.
//	    Decoded leniently: v1 readers always ignored fields they did not
//	    know.
//	v2: the RestorePending state; the claim is decoded strictly.
//	v3: passthrough devices (the vfio field). An older driver must not
//	    read such a record as a whole GPU: it would hand out a GPU that
//	    is bound to vfio-pci. It leaves a newer record untouched instead.
//
// Put writes the oldest format that holds a record (writeFormat), not the
// newest: a rollback to the release before, which reads only that older
// format, then still reads every claim (test/e2e's upgrade test rolls back
// to 1b7ce73). So bootID rides in v1 files: a v1 reader ignores it, and
// if that reader rewrites the record without it, the next start of this
// driver checks the claim's devices instead of trusting the boot (see
// pkg/prepare/restore.go), which costs a MIG listing and loses nothing.
const (
	// FormatVersion is the newest format Open reads and Put writes.
	FormatVersion = 3
	// Version is the version string of FormatVersion.
	Version = versionPrefix + "3"

	versionPrefix = "gpu.nvidia.com/checkpoint/v"
	// oldestFormat is the oldest format that is still read.
	oldestFormat = 1
)

// NewerVersionError is the answer for a claim whose record a newer driver
// wrote (the node was downgraded). The record stays on disk untouched; the
// claim can be used or unprepared again once that driver is back.
type NewerVersionError struct {
	UID types.UID
	// Version is the version string of the record's file.
	Version string
}

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("claim %s was prepared by a newer driver (checkpoint format %s; this driver reads up to v%d): upgrade the driver again to use or unprepare it",
		e.UID, e.Version, FormatVersion)
}

// Newer reports whether a claim is recorded in a newer format than this
// driver reads, and that format's version string.
func (s *Store) Newer(uid types.UID) (version string, ok bool) {
	version, ok = s.newer[uid]
	return version, ok
}

// NewerError returns a *NewerVersionError if a claim is recorded in a newer
// format, nil otherwise. Prepare and unprepare of such a claim must fail
// with it and touch nothing.
func (s *Store) NewerError(uid types.UID) error {
	if v, ok := s.newer[uid]; ok {
		return &NewerVersionError{UID: uid, Version: v}
	}
	return nil
}

// parseVersion returns N of "gpu.nvidia.com/checkpoint/v<N>", N >= 1
// written without leading zeros; ok is false for anything else.
func parseVersion(v string) (n int, ok bool) {
	digits, found := strings.CutPrefix(v, versionPrefix)
	if !found || digits == "" || len(digits) > 9 || digits[0] == '0' {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// decodeFile decodes one file's bytes. Only the top-level "version" string
// is read before the version is known: it is the one part of the layout
// every format keeps, so a newer file is recognised however else it changed.
func decodeFile(data []byte) (PreparedClaim, error) {
	var head struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return PreparedClaim{}, fmt.Errorf("decode: %w", err)
	}
	n, ok := parseVersion(head.Version)
	if !ok || n < oldestFormat {
		return PreparedClaim{}, fmt.Errorf("unsupported version %q", head.Version)
	}
	if n > FormatVersion {
		return PreparedClaim{}, &NewerVersionError{Version: head.Version}
	}
	var f file
	if err := decodeJSON(data, &f, n >= 2); err != nil {
		return PreparedClaim{}, fmt.Errorf("decode: %w", err)
	}
	if crc32.ChecksumIEEE(f.Claim) != f.Checksum {
		return PreparedClaim{}, errors.New("checksum mismatch")
	}
	c, err := decodeClaim(n, f.Claim)
	if err != nil {
		return PreparedClaim{}, err
	}
	if err := c.Validate(); err != nil {
		return PreparedClaim{}, err
	}
	return c, nil
}

// writeFormat is the format Put writes c in: the oldest one that holds
// it. A RestorePending record needs v2: a v1 reader would find no valid
// state in it and move it aside.
func writeFormat(c PreparedClaim) int {
	for _, d := range c.Devices {
		if d.Vfio != nil {
			return 3
		}
	}
	if c.State == RestorePending {
		return 2
	}
	return 1
}

// decodeClaim decodes a claim of format n (oldestFormat..FormatVersion).
//
// v1 was written by several commits with growing field sets, all of them
// subsets of today's fields, and is decoded leniently, as v1 readers always
// did. v2 and later are decoded strictly: a field this code does not
// know means the record is not what its version says.
func decodeClaim(n int, payload []byte) (PreparedClaim, error) {
	if err := checkPresent(payload); err != nil {
		return PreparedClaim{}, err
	}
	var c PreparedClaim
	if err := decodeJSON(payload, &c, n >= 2); err != nil {
		return PreparedClaim{}, fmt.Errorf("decode claim: %w", err)
	}
	if n < 2 && c.State == RestorePending {
		return PreparedClaim{}, fmt.Errorf("state %s does not exist in format v%d", c.State, n)
	}
	for i, d := range c.Devices {
		if n < 3 && d.Vfio != nil {
			return PreparedClaim{}, fmt.Errorf("devices[%d]: vfio does not exist in format v%d", i, n)
		}
	}
	return c, nil
}

// checkPresent fails when a field is missing whose zero value would read
// as a real value: a MIG record's giID and ciID (0 is a valid instance ID;
// every format that has "mig" always writes both). Fields whose zero value
// is invalid (uid, state, device) are left to Validate.
func checkPresent(payload []byte) error {
	var p struct {
		Devices []struct {
			Mig *struct {
				GIID *json.RawMessage `json:"giID"`
				CIID *json.RawMessage `json:"ciID"`
			} `json:"mig"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return fmt.Errorf("decode claim: %w", err)
	}
	for i, d := range p.Devices {
		if d.Mig != nil && (d.Mig.GIID == nil || d.Mig.CIID == nil) {
			return fmt.Errorf("devices[%d]: mig record without giID or ciID", i)
		}
	}
	return nil
}

// decodeJSON decodes exactly one JSON value, refusing unknown fields when
// strict.
func decodeJSON(data []byte, v any, strict bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}
